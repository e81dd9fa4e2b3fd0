"""Render a built-in kernel for a small reference, load it, and compare ModelNew with Model (shared by the
family tests)."""

import ast
import importlib.util
import itertools
from pathlib import Path

import torch

from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.family import Move, Params
from kernelcraft.propose.builtin.plan import Op

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
_counter = itertools.count()

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


def reference(forward: str, init: str = "self", body: str = "") -> str:
    """A small reference problem: `class Model` with the given __init__ parameters/body and forward return."""
    return (HEAD + f"class Model(nn.Module):\n    def __init__({init}):\n        super().__init__()\n"
            + "".join(f"        {line}\n" for line in body.split("\n") if line)
            + f"\n    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        return {forward}\n")


def load(source: str, tmp_path: Path):
    name = f"kc_candidate_{next(_counter)}"
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def moves(op: Op, backend: str = "triton") -> list[Move]:
    return registry.moves(op, backend)


def needs_relaxed(move: Move) -> bool:
    return move.relaxed


def as_params(op: Op, params: Params | dict | None, backend: str = "triton") -> Params:
    """`params` as a family's parameters: given, or the first move's with the fields of a dict changed."""
    if isinstance(params, Params):
        return params
    return registry.moves(op, backend)[0].params.but(**(params or {}))


def render(op: Op, ref_src: str, params: Params | dict | None = None, backend: str = "triton") -> str:
    """The candidate file for one op: registry.render on `params` (as_params)."""
    return registry.render(op, ref_src, as_params(op, params, backend))


def parts(op: Op, params: Params | dict | None = None):
    """(the parameters as JSON, the module-level sources, the forward body) of one op."""
    p = as_params(op, params)
    rendered = registry.parts(op, p)
    return p.to_json(), rendered.sources(), rendered.body


ALLOWED_CALLS = {"torch.empty", "torch.empty_like", "torch.cuda.get_device_properties",
                 "torch.cuda.get_device_capability", "math.prod", "triton.cdiv",
                 "triton.next_power_of_2", "np2", "min", "max", "float", "int", "list", "tuple", "any", "zip",
                 "ValueError", "TypeError", "next", "all", "range", "len", "TensorDescriptor.from_tensor", "kc_tiles",
                 "kc_conv_out_size", "kc_conv_padding", "kc_phase_taps", "kc_pool_out", "kc_tma_ok", "kc_matmul_tma",
                 "kc_linear_tma", "torch.zeros", "torch.cuda.current_stream",
                 "torch.full", "isinstance",  # torch.full: a number passed to forward, as a 0-dim operand
                 "torch.tensor"}  # a broadcast layout's sizes and strides, once per layout (kc_bcast_packed)
ALLOWED_METHODS = {"contiguous", "permute", "reshape", "view", "squeeze", "unsqueeze", "size", "numel", "dim", "stride", "element_size", "data_ptr", "t",
                   "blocks_per_sm",  # an NVRTC kernel's occupancy query
                   "is_floating_point", "append",  # a number passed to forward made an operand (kc_bcast_numbers)
                   "expand",  # a view: an epilogue operand broadcast before a copy (kc_operand_args)
                   "transpose", "flip",  # a weight's copy with its taps reversed (a transposed conv as a conv)
                   "as_strided",  # a view of overlapping rows a TMA descriptor reads (the shifted conv's packed K)
                   "unflatten", "movedim"}  # K chunks of an operand as a batch (the GEMM's split-K on TMA)


def _dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join(reversed(parts + [node.id])) if isinstance(node, ast.Name) else ""


def assert_no_torch_compute(source: str) -> None:
    """ModelNew.forward (and the generated helpers) call only allocation, shape helpers and our own kernels."""
    tree = ast.parse(source)
    model_new = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    assert [b.id for b in model_new.bases if isinstance(b, ast.Name)] == ["Model"]
    assert [f.name for f in model_new.body if isinstance(f, ast.FunctionDef)] == ["forward"]
    helpers = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("kc_")
               and not n.decorator_list]
    helper_names = {fn.name for fn in helpers}  # calls between generated helpers: each is checked itself
    launches = 0
    for fn in [model_new, *helpers]:
        for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
            if isinstance(call.func, ast.Subscript):  # kernel[grid](...), or kc_kernels[name](...) (NVRTC)
                assert _dotted(call.func.value).startswith("kc_"), ast.unparse(call)
                launches += 1
                continue
            name = _dotted(call.func)
            if name.startswith("kc_kernels."):  # an NVRTC kernel by attribute
                launches += 1
                continue
            method = call.func.attr if isinstance(call.func, ast.Attribute) else None
            if name.startswith("KC_") and method in ("get", "clear"):  # a generated file's cache (plans, layouts)
                continue
            assert name in ALLOWED_CALLS or method in ALLOWED_METHODS or name in helper_names, \
                f"ModelNew calls {ast.unparse(call)}"
    assert launches >= 1


def move_tolerance(params) -> dict:
    """fp32 moves: 1e-4 (3xTF32 is fp32-grade); the TF32 move, compiled on a GPU, 2e-2 (the interpreter computes
    its products in fp32)."""
    values = params.to_json() if isinstance(params, Params) else params
    tf32 = DEVICE == "cuda" and values.get("precision") == "tf32"
    return {"rtol": 2e-2, "atol": 2e-2} if tf32 else {"rtol": 1e-4, "atol": 1e-4}


def check(op: Op, ref_src: str, params: dict, cases: list, tmp_path: Path, rtol=1e-5, atol=1e-5, dtype=None,
          patch=None):
    """Render `op` with `params` for `ref_src`; for each (init args, input shape) compare ModelNew with Model.
    `patch`, if given, is called with the loaded candidate module first (a test's spy on its kernels)."""
    source = render(op, ref_src, params)
    assert source.startswith(ref_src.rstrip())
    assert "class ModelNew(Model)" in source and "import triton.language as tl" in source
    assert_no_torch_compute(source)
    module = load(source, tmp_path)
    if patch:
        patch(module)
    for init, shape, *scale in cases:
        torch.manual_seed(0)
        ref = module.Model(*init).to(DEVICE, dtype or torch.float32)
        torch.manual_seed(0)
        new = module.ModelNew(*init).to(DEVICE, dtype or torch.float32)
        x = (torch.randn(shape, device=DEVICE) * (scale[0] if scale else 1.0)).to(dtype or torch.float32)
        with torch.no_grad():
            want, got = ref(x), new(x)
        assert got.shape == want.shape and got.dtype == want.dtype, (shape, got.shape, want.shape)
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol, msg=lambda m: f"{op} {params} {shape}: {m}")


def match_at_shapes(module, shapes: list, rtol=1e-4, atol=1e-4) -> None:
    """A loaded candidate's ModelNew against its Model (no init arguments, eval mode as the verifier runs them) on
    one random input of each shape."""
    for shape in shapes:
        torch.manual_seed(0)
        ref = module.Model().to(DEVICE).eval()
        torch.manual_seed(0)
        new = module.ModelNew().to(DEVICE).eval()
        x = torch.randn(shape, device=DEVICE)
        with torch.no_grad():
            torch.testing.assert_close(new(x), ref(x), rtol=rtol, atol=atol, msg=lambda m: f"{shape}: {m}")


def check_small_problem(op: Op, problem, params: dict, tmp_path: Path, rtol=1e-4, atol=1e-4, want=None):
    """Render `op` for a suite problem and compare ModelNew with Model (or `want(model, *inputs)`) on the problem's
    SMALL_SIZES, in eval mode like the verifier; returns ModelNew's output."""
    return check_source(problem, render(op, problem.source, params), tmp_path, rtol, atol, want)


def check_source(problem, source: str, tmp_path: Path, rtol=1e-4, atol=1e-4, want=None):
    """Compare a candidate file's ModelNew with its Model (or `want(model, *inputs)`) at the problem's small sizes
    (its SMALL_SIZES, or sizes derived from the published ones), in eval mode like the verifier; returns ModelNew's
    output."""
    from kernelcraft.problems import Problem

    assert_no_torch_compute(source)
    path = tmp_path / f"{problem.name.replace('/', '_')}_{next(_counter)}.py"
    path.write_text(source)
    module = Problem(problem.name, path, source).load(small=True)
    init = module.get_init_inputs()
    torch.manual_seed(0)
    ref = module.Model(*init).to(DEVICE).eval()
    torch.manual_seed(0)
    new = module.ModelNew(*init).to(DEVICE).eval()
    torch.manual_seed(1)
    inputs = [t.to(DEVICE) if isinstance(t, torch.Tensor) else t for t in module.get_inputs()]  # numbers stay
    with torch.no_grad():
        got = new(*inputs)
        torch.testing.assert_close(got, want(ref, *inputs) if want else ref(*inputs), rtol=rtol, atol=atol)
    return got


def check_first_answer(problem, tmp_path: Path) -> None:
    """The built-in engineer's first kernel for `problem` (as `implement` answers on the CPU), checked by
    check_source."""
    from kernelcraft.propose.base import Request
    from kernelcraft.propose.builtin.proposer import BuiltinProposer
    from kernelcraft.propose.parse import parse_kernel

    answer = BuiltinProposer("cpu").ask(Request("implement", problem, "triton"))
    parsed = parse_kernel(answer.text)
    assert answer.error is None and parsed.error is None
    check_source(problem, parsed.source, tmp_path)


def ident(params) -> str:
    """A test id for parameters (a family's, or a dict of changes)."""
    import json

    return json.dumps(params.to_json() if isinstance(params, Params) else params, sort_keys=True)


class Launches:
    """A `check(patch=...)` spy: wraps the candidate's kernels `names` (module globals launched as kernel[grid](...))
    and records in `seen` which of them the forward launches."""

    def __init__(self, *names: str):
        self.names, self.seen = names, []

    def __call__(self, module) -> None:
        for name in self.names:
            setattr(module, name, _Launched(getattr(module, name), name, self.seen))


class _Launched:
    def __init__(self, kernel, name: str, seen: list):
        self.kernel, self.name, self.seen = kernel, name, seen

    def __getitem__(self, grid):
        self.seen.append(self.name)
        return self.kernel[grid]


class Keywords:
    """A `check(patch=...)` spy (or one called with a loaded candidate): for each launch of the kernels `names`,
    `seen` gets the launch's keyword arguments `keys` (its constexprs, num_warps, ...): the value of a single key, a
    dict of several; as (kernel name, that) where several kernels are watched."""

    def __init__(self, names: str | tuple[str, ...], *keys: str):
        self.names = (names,) if isinstance(names, str) else tuple(names)
        self.keys, self.seen = keys, []

    def __call__(self, module) -> None:
        for name in self.names:
            setattr(module, name, _Watched(getattr(module, name), name, self))

    def record(self, name: str, kwargs: dict) -> None:
        value = kwargs[self.keys[0]] if len(self.keys) == 1 else {k: kwargs[k] for k in self.keys}
        self.seen.append((name, value) if len(self.names) > 1 else value)


class _Watched:
    def __init__(self, kernel, name: str, spy: Keywords):
        self.kernel, self.name, self.spy = kernel, name, spy

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.spy.record(self.name, kwargs)
            return self.kernel[grid](*args, **kwargs)
        return launch


# Tests that narrow a move's channel chunk (BLOCK_K) so that a few channels fill several: 4 in the interpreter; a
# GPU's tl.dot needs K >= 16, so there the chunk and every channel count of such a test are CHANNELS times larger
# (the same cases: full chunks, a masked one, fewer channels than a chunk).
CHANNELS = 1 if DEVICE == "cpu" else 4


def more_channels(cases, spatial: int) -> list:
    """Conv cases ((cin, cout, k, s, p, d, g, ...), input shape) with CHANNELS times the in- and out-channels (and the
    groups of a depthwise case, so it stays one); `spatial` the conv's spatial dims."""
    out = []
    for init, shape in cases:
        init = list(init)
        depthwise = len(init) > 6 and init[6] == init[0]
        init[0], init[1] = init[0] * CHANNELS, init[1] * CHANNELS
        if depthwise:
            init[6] = init[0]
        shape = list(shape)
        shape[len(shape) - spatial - 1] *= CHANNELS
        out.append((tuple(init), tuple(shape)))
    return out
