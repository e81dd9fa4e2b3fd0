"""A static look at Triton kernels for a Hopper GPU on any machine, no GPU needed: a candidate's launches recorded
instead of run (its forward on meta tensors), each compiled ahead of time for sm_90a with the specialization a real
launch would get (16-aligned pointers, integers divisible by 16 hinted so, ones as constants), and what ptxas made of
it: registers, spills (local memory), shared memory, and the SASS.

Triton's own toolchain does the work (its bundled ptxas and cuobjdump), so what it reports is what that Triton
version builds. A kernel whose build lost its registers ("REG:32" with kilobytes of LOCAL) runs many times slower
than its neighbours; this is how a test or a probe sees that without a GPU. `candidate_builds` does it all for a
candidate file in a process of its own (the interpreter, once it has run, leaves its semantics in triton.language).
"""

from __future__ import annotations

import collections
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64",
         torch.int64: "i64", torch.int32: "i32", torch.int8: "i8", torch.bool: "i1"}


def tools() -> Path:
    """The folder of Triton's bundled NVIDIA tools (ptxas, cuobjdump)."""
    import triton

    return Path(triton.__file__).parent / "backends" / "nvidia" / "bin"


@dataclass(frozen=True)
class Launch:
    """One recorded launch: the kernel (a JITFunction), its grid, positional and keyword arguments."""

    fn: object
    grid: object
    args: tuple
    kwargs: dict

    @property
    def name(self) -> str:
        return getattr(self.fn, "fn", self.fn).__name__


class _Recorder:
    """Stands for a kernel: `kernel[grid](...)` records the launch instead of running it."""

    def __init__(self, fn, log: list[Launch]):
        self.fn, self.log = fn, log

    def __getitem__(self, grid):
        return lambda *args, **kw: self.log.append(Launch(self.fn, grid, args, kw))


def _kernels(scope: dict) -> dict:
    """The @triton.jit kernels among `scope`'s values: JITFunctions, or under TRITON_INTERPRET=1 the interpreter's
    stand-ins for them."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    return {name: value for name, value in scope.items() if isinstance(value, (JITFunction, InterpretedFunction))}


def recorded(module, run) -> list[Launch]:
    """The launches of every @triton.jit kernel of `module` that `run()` makes (on meta tensors, say), none run;
    the kernels are put back afterwards."""
    log: list[Launch] = []
    jitted = _kernels(vars(module))
    try:
        for name, value in jitted.items():
            setattr(module, name, _Recorder(value, log))
        run()
    finally:  # a kernel that calls a jitted helper compiles against the helper itself
        for name, value in jitted.items():
            setattr(module, name, value)
    return log


def compile_launch(launch: Launch, capability: int = 90):
    """The launch's kernel compiled for sm_<capability>a as a launch with these arguments would specialize it. A
    compiled kernel only (a JITFunction): under TRITON_INTERPRET=1 the kernels are the interpreter's stand-ins, and
    the interpreter leaves its own semantics patched into triton.language after it runs, so compile in a process
    without it (`candidate_builds`)."""
    from triton.runtime.jit import JITFunction

    if not isinstance(launch.fn, JITFunction):
        raise TypeError(f"{launch.name} is no compiled kernel (TRITON_INTERPRET=1?): compile it in a process without "
                        "the interpreter, as candidate_builds does")
    return _compile(launch, launch.fn, capability)


def _compile(launch: Launch, fn, capability: int):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.tools.tensor_descriptor import TensorDescriptor

    sig, consts, attrs = {}, {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in launch.kwargs:
            sig[name], consts[name] = "constexpr", launch.kwargs[name]
            continue
        a = launch.args[i]
        if isinstance(a, torch.Tensor):
            sig[name], attrs[(i,)] = "*" + TYPES[a.dtype], [["tt.divisibility", 16]]
        elif isinstance(a, bool):
            sig[name] = "i1"
        elif isinstance(a, int) and a == 1:
            sig[name], consts[name] = "constexpr", 1
        elif isinstance(a, int):
            sig[name] = "i32" if -2 ** 31 <= a < 2 ** 31 else "i64"
            if a % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(a, float):
            sig[name] = "fp32"
        elif isinstance(a, TensorDescriptor):  # a TMA operand: its dtype and block shape specialize the kernel
            sig[name] = f"tensordesc<{TYPES[a.base.dtype]}{list(a.block_shape)}>"
        else:
            raise TypeError(f"{launch.name}: argument {name}: {a!r}")
    options = {k: launch.kwargs[k] for k in ("num_warps", "num_stages") if k in launch.kwargs}
    return triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", capability, 32),
                          options=options)


@dataclass(frozen=True)
class Resources:
    """What ptxas gave a compiled kernel: registers a thread, local memory (spills) and shared memory in bytes."""

    registers: int
    local: int
    shared: int

    @property
    def collapsed(self) -> bool:
        """The build spills to local memory (a build that lost its registers does: ptxas's 32-register floor and
        kilobytes of LOCAL)."""
        return self.local > 0


def _cuobjdump(compiled, flag: str) -> str:
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "k.cubin")
        Path(path).write_bytes(compiled.asm["cubin"])
        return subprocess.run([tools() / "cuobjdump", flag, path], capture_output=True, text=True,
                              check=True).stdout


def resources(compiled) -> Resources:
    """The compiled kernel's registers, spills and shared memory (cuobjdump -res-usage)."""
    usage = _cuobjdump(compiled, "-res-usage")
    m = re.search(r"REG:(\d+) STACK:\d+ SHARED:(\d+) LOCAL:(\d+)", usage)
    if m is None:
        raise RuntimeError(f"no resource usage in cuobjdump's report: {usage.strip()[:200]}")
    return Resources(int(m.group(1)), int(m.group(3)), int(m.group(2)))


def sass(compiled) -> str:
    """The compiled kernel's SASS (cuobjdump -sass)."""
    return _cuobjdump(compiled, "-sass")


def loops(text: str) -> list[tuple[int, collections.Counter]]:
    """Each backward branch's body in SASS `text`: (instructions, mix by opcode)."""
    ins = [(int(m.group(1), 16), m.group(2).strip())
           for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*?);", text)]
    out = []
    for addr, body_text in ins:
        m = re.search(r"BRA\s+(?:`\()?0x([0-9a-f]+)", body_text)
        if m and int(m.group(1), 16) < addr:
            body = [t for a, t in ins if int(m.group(1), 16) <= a <= addr]
            ops = [re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0] for t in body]
            out.append((len(body), collections.Counter(ops)))
    return out


def candidate_builds(path: Path, cases: list, capability: int = 90, timeout_s: float = 900) -> list[dict]:
    """Every Triton launch of a candidate file's forward, compiled for sm_<capability>a: for each case (the init
    arguments of its ModelNew, the shapes of its fp32 inputs) the forward runs on meta tensors, launches recorded,
    in a fresh process without the interpreter (TRITON_INTERPRET=0, whatever this one has). A row per launch:
    {"case": index, "kernel": name, "registers", "local", "shared"}."""
    run = subprocess.run([sys.executable, "-m", "kernelcraft.backends.triton_static", str(path), json.dumps(cases),
                          str(capability)], capture_output=True, text=True, timeout=timeout_s,
                         env={**os.environ, "TRITON_INTERPRET": "0"})
    if run.returncode != 0:
        raise RuntimeError(f"compiling {path}'s launches failed: {run.stderr.strip()[-2000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _builds(path: str, cases: list, capability: int) -> list[dict]:
    spec = importlib.util.spec_from_file_location("kc_static_candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = []
    for index, (init, shapes) in enumerate(cases):
        model = module.ModelNew(*init).to("meta")
        inputs = [torch.empty(shape, device="meta") for shape in shapes]
        for launch in recorded(module, lambda: model(*inputs)):
            res = resources(compile_launch(launch, capability))
            rows.append({"case": index, "kernel": launch.name, "registers": res.registers, "local": res.local,
                         "shared": res.shared})
    return rows


if __name__ == "__main__":  # candidate_builds' child: a candidate file, its cases (JSON), the capability
    print(json.dumps(_builds(sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]))))
