"""A model's regions as standalone KernelBench-format problems: capture (capture.py), cut (regions.py), observe the
values each node takes on the example inputs, and write each region as a problem file.

A region's problem is specialised to what the model ran at: its forward is the region's graph as torch.fx prints
it (sizes written in), `get_inputs()` draws random tensors of the shapes, dtypes and layouts (a transposed or
sliced view's strides) observed at the region's inputs,
and a value that is not a tensor (a size read from a tensor, a tuple) is written in as a constant. Its parameters
and buffers (and values computed from them alone, such as an attention mask) are the model's own: `Model()` takes
no arguments and reads them from `<name>.pt` beside the problem file (torch.load, weights_only), so the file loads
through kernelcraft.problems like any other, and a region without state has no .pt at all. The verifier runs a copy
of the problem's text in its worker's own directory, where nothing lies beside it: a file written by write_problems
also names the directory it was written to, and reads the .pt from there when none is beside it.
"""

from __future__ import annotations

import builtins
import re
import textwrap
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
import torch.nn as nn
from torch import fx
from torch.fx.graph import _custom_builtins

from kernelcraft.apply.capture import Captured, capture
from kernelcraft.apply.regions import Group, constant_nodes, partition
from kernelcraft.errors import KernelcraftError
from kernelcraft.verify.inputs import unshared


class ExtractError(KernelcraftError):
    """A captured graph whose regions cannot be written as standalone problems."""


@dataclass(frozen=True)
class TensorMeta:
    shape: tuple[int, ...]
    dtype: str  # "float32"
    high: int = 0  # integer inputs: one past the largest value observed (indices stay in range)
    # its strides where they are not the contiguous ones and no two elements share memory (a transposed or sliced
    # view: a head split, one of q/k/v cut from a fused projection); None: contiguous, or overlapping (an expand),
    # which a region's problem draws contiguous
    stride: tuple[int, ...] | None = None

    @property
    def spec(self) -> tuple:
        """As a problem's INPUTS writes it: (shape, dtype, high), and the strides where they are kept."""
        return (self.shape, self.dtype, self.high) + ((self.stride,) if self.stride is not None else ())


@dataclass
class Region:
    name: str  # "03_conv_conv2d_1": its position in running order, kind, the op that started it (else its first)
    kind: str  # conv, linear, matmul, norm, pool, softmax, reduce, attention, elementwise, layout, other
    nodes: list[str]  # the captured graph's nodes it computes, in graph order
    inputs: list[str]  # the nodes (or model inputs) whose tensors its forward takes, in order
    input_meta: list[TensorMeta]
    outputs: list[str]  # the nodes whose values it returns (a tuple when several)
    module: fx.GraphModule = field(repr=False)  # the forward, in memory, holding its state
    model: str = ""  # the model's name, and how its graph was captured: for the problem file's docstring
    method: str = ""
    share: float | None = None  # of the model's time, once profiled (profile.py)
    held: dict[str, str] = field(default_factory=dict)  # its parameters and buffers -> the graph nodes they hold
    output_meta: list[TensorMeta | None] = field(default_factory=list)  # its outputs' (None: not a tensor)

    @property
    def source(self) -> str:
        """The problem file's text, reading its .pt from beside the file."""
        return self.problem_source()

    def problem_source(self, written_to: Path | None = None) -> str:
        """The problem file's text; `written_to`: the directory the file and its .pt are written to, where the
        .pt is read from when the file runs elsewhere (the verifier's worker)."""
        return problem_source(self.name, self.kind, self.nodes, self.input_meta, self.module, self.model,
                              self.method, written_to)

    @property
    def state(self) -> dict:
        """What the problem's .pt holds: its parameters and buffers by name."""
        return {"parameters": {n: p.detach() for n, p in self.module.named_parameters()},
                "buffers": {n: b for n, b in self.module.named_buffers()}}


@dataclass
class Extraction:
    model: str  # the model's name (its problem's)
    method: str  # how the graph was captured: "fx" or "export"
    regions: list[Region]  # in an order they can run in
    notes: list[str] = field(default_factory=list)  # what was rewritten, and what no region covers
    graph_module: fx.GraphModule = field(default=None, repr=False)  # the captured forward (capture.py's form)
    inputs: list[TensorMeta | None] = field(default_factory=list)  # the model's inputs (None: not a tensor)
    origins: dict[str, str | None] = field(default_factory=dict)  # Captured.origins

    def model_target(self, target: str) -> str | None:
        """The model's qualified name of a get_attr target of the captured graph; None: a constant torch.export
        lifted that the model does not hold."""
        return self.origins.get(target, target)

    def with_shares(self, shares: dict[str, float]) -> "Extraction":
        return replace(self, regions=[replace(r, share=shares.get(r.name, r.share)) for r in self.regions])


def extract_problem(problem, small: bool = False, sizes=None) -> Extraction:
    """A kernelcraft Problem's regions, at its sizes (`small`: those for a CPU), on its example inputs."""
    module = problem.load(small=small, sizes=sizes)
    model = module.Model(*module.get_init_inputs())
    return extract_model(model, list(module.get_inputs()), problem.name.replace("/", "_"))


def extract_model(model: nn.Module, inputs: list, name: str = "model") -> Extraction:
    """`model`'s regions as problems; `inputs` are example inputs (their shapes are the regions' shapes)."""
    captured = capture(model, inputs)
    gm = captured.graph_module
    with torch.no_grad():
        values = observe(gm, inputs)
    constants = constant_nodes(gm.graph)
    scalars = {n for n in gm.graph.nodes if n.op in ("call_function", "call_method")
               and not _has_tensor(values[n.name])}
    regions = [_region(gm, group, k, constants, values, name, captured)
               for k, group in enumerate(partition(gm.graph, constants | scalars))]
    notes = list(captured.notes)
    held = [n.name for n in gm.graph.nodes if n in constants and n not in scalars]
    if held:
        notes.append("computed from parameters alone, held as buffers by the regions that read them: "
                     + ", ".join(held))
    if scalars:
        notes.append("numbers computed from sizes, written into the regions as constants: "
                     + ", ".join(n.name for n in gm.graph.nodes if n in scalars))
    idle = [r.name for r in regions if r.kind == "layout"]
    if idle:
        notes.append("regions that only reshape or copy (little to optimize): " + ", ".join(idle))
    return Extraction(name, captured.method, regions, notes, gm,
                      [tensor_meta(x) if isinstance(x, torch.Tensor) else None for x in inputs], captured.origins)


def observe(gm: fx.GraphModule, inputs: list) -> dict[str, object]:
    """The value of every node of `gm` when it runs on `inputs`, by node name."""
    values: dict[str, object] = {}

    class Recorder(fx.Interpreter):
        def run_node(self, node):
            values[node.name] = result = super().run_node(node)
            return result
    Recorder(gm).run(*inputs)
    return values


def compose(extraction: Extraction, inputs: list, modules: dict[str, nn.Module] | None = None):
    """The model's output computed region by region (each region's module, or the one `modules` gives for its
    name): what a model reassembled from the regions returns."""
    graph = extraction.graph_module.graph
    env = {n.name: x for n, x in zip([n for n in graph.nodes if n.op == "placeholder"], inputs)}
    for region in extraction.regions:
        module = (modules or {}).get(region.name, region.module)
        out = module(*[env[n] for n in region.inputs])
        env.update(zip(region.outputs, out if len(region.outputs) > 1 else [out]))
    output = next(n for n in graph.nodes if n.op == "output")
    return fx.node.map_arg(output.args[0], lambda n: env[n.name])


def write_problems(extraction: Extraction, out_dir: str | Path) -> list[Path]:
    """Each region's problem file (and its .pt) in `out_dir`; the problem files' paths, in running order."""
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for region in extraction.regions:
        path = out / f"{region.name}.py"
        path.write_text(region.problem_source(out))
        state = region.state
        if state["parameters"] or state["buffers"]:
            torch.save(state, path.with_suffix(".pt"))
        paths.append(path)
    return paths


# -- one region ------------------------------------------------------------------------------------------------

def _region(gm: fx.GraphModule, group: Group, index: int, constants: set, values: dict, model: str,
            captured: Captured) -> Region:
    name = f"{index:02d}_{group.kind}_{group.named_by.name}"
    inside = set(group.nodes)
    external = list(dict.fromkeys(i for n in group.nodes for i in n.all_input_nodes if i not in inside))
    outputs = [n for n in group.nodes if any(u not in inside for u in n.users)]
    graph, root, env, inputs, held = fx.Graph(), nn.Module(), {}, [], {}
    for node in external:  # placeholders first: the forward's signature
        value = values[node.name]
        if node.op != "get_attr" and node not in constants and isinstance(value, torch.Tensor):
            env[node] = graph.placeholder(_identifier(node.name))
            inputs.append(node)
    for node in external:
        if node in env:
            continue
        value = values[node.name]
        if node.op == "get_attr" or (node in constants and isinstance(value, torch.Tensor)):
            env[node] = graph.get_attr(_hold(root, node, value, gm))
            held[env[node].target] = node.name
        elif _has_tensor(value):
            raise ExtractError(f"region {name} reads {node.name}, a {type(value).__name__} of tensors; a region's "
                               "inputs are tensors")
        else:  # a size, a shape, a flag: fixed at the shapes the model ran at
            env[node] = tuple(value) if isinstance(value, torch.Size) else value
    for node in group.nodes:
        env[node] = graph.node_copy(node, lambda n: env[n])
    graph.output(env[outputs[0]] if len(outputs) == 1 else tuple(env[o] for o in outputs))
    module = fx.GraphModule(root, graph)
    meta = [tensor_meta(values[n.name]) for n in inputs]
    out_meta = [tensor_meta(values[o.name]) if isinstance(values[o.name], torch.Tensor) else None for o in outputs]
    return Region(name, group.kind, [n.name for n in group.nodes], [n.name for n in inputs], meta,
                  [o.name for o in outputs], module, model, captured.method, held=held, output_meta=out_meta)


def _identifier(name: str) -> str:
    return re.sub(r"\W", "_", name)


def _has_tensor(value) -> bool:
    return isinstance(value, torch.Tensor) or (isinstance(value, (tuple, list)) and any(map(_has_tensor, value)))


def _hold(root: nn.Module, node: fx.Node, value, gm: fx.GraphModule) -> str:
    """Register a parameter, buffer or constant the region reads on its module; the name it has there."""
    name = _identifier(node.target if node.op == "get_attr" else node.name)
    original = _fetch(gm, node.target) if node.op == "get_attr" else value
    if isinstance(original, nn.Parameter):
        root.register_parameter(name, original)
    elif isinstance(original, torch.Tensor):
        root.register_buffer(name, original.detach())
    else:
        raise ExtractError(f"{node.name} is a {type(original).__name__}, not a tensor; a region holds tensors only")
    return name


def _fetch(gm: fx.GraphModule, target: str):
    value = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def tensor_meta(value: torch.Tensor) -> TensorMeta:
    """A tensor's shape and dtype, and for integers one past its largest value (random draws stay in range)."""
    dtype = str(value.dtype).removeprefix("torch.")
    integer = not value.dtype.is_floating_point and not value.dtype.is_complex and value.dtype != torch.bool
    high = int(value.max().item()) + 1 if integer and value.numel() else 0
    return TensorMeta(tuple(value.shape), dtype, high, layout(value))


def layout(value: torch.Tensor) -> tuple[int, ...] | None:
    """`value`'s strides where a kernel would meet them as they are: not contiguous, and no element sharing memory
    with another."""
    if value.is_contiguous() or value.numel() == 0 or not unshared(value):
        return None
    return tuple(value.stride())


# -- the problem file --------------------------------------------------------------------------------------------

_LOAD_STATE = '''
        weights = Path(__file__).with_name("{stem}.pt")
        if not weights.exists():  # a copy of this file run elsewhere (the verifier's worker){elsewhere}
        # on the default device: a cost pass that builds the model on the meta device gets shapes only
        state = torch.load(weights, map_location=torch.get_default_device(), weights_only=True)
        for name, value in state["parameters"].items():
            self.register_parameter(name, nn.Parameter(value))
        for name, value in state["buffers"].items():
            self.register_buffer(name, value)'''

_TEMPLATE = '''"""{model}, region {name} ({kind}): graph nodes {nodes} (captured with {method}).

Written by kernelcraft.apply: the forward is the region's graph, specialised to the shapes the model ran at.{state_doc}
"""
from pathlib import Path

import torch
import torch.nn as nn
{imports}

# The region's inputs as the model ran: (shape, dtype, for integers one past the largest value seen, and its
# strides where the model handed it over non-contiguous: a kernel here meets the layout it meets in the model).
INPUTS = {inputs}


class Model(nn.Module):
    def __init__(self):
        super().__init__(){load}

{forward}

def get_inputs():
    return [_random(*spec) for spec in INPUTS]


def get_init_inputs():
    return []


def _random(shape, dtype, high, stride=None):
    dtype = getattr(torch, dtype)
    if dtype == torch.bool:
        value = torch.rand(shape) < 0.5
    elif dtype.is_floating_point:
        value = torch.randn(shape, dtype=dtype)
    else:
        value = torch.randint(0, max(high, 1), shape, dtype=dtype)
    if stride is None:
        return value
    return torch.empty_strided(shape, stride, dtype=dtype).copy_(value)  # the model's layout, the same values
'''


def problem_source(name: str, kind: str, nodes: list[str], meta: list[TensorMeta], module: fx.GraphModule,
                   model: str, method: str, written_to: Path | None = None) -> str:
    code = module.graph.python_code(root_module="self")
    stateful = any(True for _ in module.parameters()) or any(True for _ in module.buffers())
    return _TEMPLATE.format(
        model=model, name=name, kind=kind, nodes=", ".join(nodes), method=method,
        state_doc=f"\nIts parameters and buffers are the model's, read from {name}.pt beside this file." if stateful
        else "",
        imports="\n".join(fx_imports(code.globals, code.src)),
        inputs=repr(tuple(m.spec for m in meta)),
        load=_LOAD_STATE.format(stem=name, elsewhere=_elsewhere(name, written_to)) if stateful else "",
        forward=textwrap.indent(code.src.strip("\n"), "    "))


def _elsewhere(stem: str, written_to: Path | None) -> str:
    """The line that reads the .pt from the directory the file was written to; none for a file not yet written."""
    if written_to is None:
        return "\n            raise FileNotFoundError(f\"{weights} holds this problem's weights; it is missing\")"
    return f"\n            weights = Path({str(written_to / f'{stem}.pt')!r})"


def fx_imports(names: dict, src: str) -> list[str]:
    """Import lines for the globals fx's printed forward refers to (fx lists its own builtins whether used or not)."""
    lines = []
    for name, value in sorted(names.items()):
        if not re.search(rf"\b{re.escape(name)}\b", src):
            continue
        if getattr(builtins, name, None) is value:
            continue  # getattr, len, ...: Python's own names need no import (the candidate guards refuse one)
        if name in _custom_builtins:
            lines.append(_custom_builtins[name].import_str)
        elif isinstance(value, type(torch)):
            lines.append(f"import {value.__name__}" + (f" as {name}" if name != value.__name__ else ""))
        elif _importable(value):
            lines.append(f"from {value.__module__} import {value.__qualname__} as {name}")
        else:
            raise ExtractError(f"the region's forward refers to {name} ({value!r}), which a problem file cannot "
                               "import")
    return [line for line in dict.fromkeys(lines) if line not in ("import torch",)]


def _importable(value) -> bool:
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", "")
    if not module or "<" in qualname or "." in qualname:
        return False
    try:
        return getattr(__import__(module, fromlist=[qualname]), qualname) is value
    except (ImportError, AttributeError):
        return False
