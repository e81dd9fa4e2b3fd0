"""Static look at a problem's kernels on sm_90 with no GPU: the built-in engineer's candidate on one of its moves,
its forward run on meta tensors at the problem's published sizes with every Triton kernel replaced by a recorder,
each recorded launch compiled ahead of time for sm_90a with the specialization a launch would get (16-aligned
pointers, integers divisible by 16, ones as constants), and per kernel: registers, spills and shared memory
(cuobjdump -res-usage) and each loop's instruction count and mix (cuobjdump -sass). Counts, not timings: what a
kernel costs per element, and how many programs an SM can hold. `--hopper`: the candidate's kc_tma_gpu says yes,
so it takes its TMA paths (tensor descriptors of meta tensors, compiled as the block shapes they carry).

    python benchmarks/sass_probe.py shared/kernelbench/level1 51_ --move 0
    python benchmarks/sass_probe.py shared/kernelbench/level1 47_ --move 0 --set '{"num_warps": 16}' --keep /tmp/sass
    python benchmarks/sass_probe.py shared/kernelbench/level1 55_ --hopper --set '{"compiled_sizes": true}'
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "0"  # compiled kernels, not the interpreter's

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from kernelcraft.problems import load_problem_dir  # noqa: E402
from kernelcraft.propose.builtin import registry  # noqa: E402
from kernelcraft.propose.builtin.proposer import BuiltinProposer  # noqa: E402

BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64",
         torch.int64: "i64", torch.int32: "i32", torch.int8: "i8", torch.bool: "i1"}


class Recorder:
    """Stands for a kernel: `kernel[grid](...)` records the launch instead of running it."""

    def __init__(self, fn: JITFunction, log: list):
        self.fn, self.log = fn, log

    def __getitem__(self, grid):
        return lambda *args, **kw: self.log.append((self.fn, grid, args, kw))


def compile_launch(fn: JITFunction, args: tuple, kw: dict):
    """The launch's kernel compiled for sm_90a as a launch with these arguments would specialize it."""
    sig, consts, attrs = {}, {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in kw:
            sig[name], consts[name] = "constexpr", kw[name]
            continue
        a = args[i]
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
            raise TypeError(f"{name}: {a!r}")
    options = {k: kw[k] for k in ("num_warps", "num_stages") if k in kw}
    return triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32), options=options)


def loops(sass: str) -> list[tuple[int, collections.Counter]]:
    """Each backward branch's body: (instructions, mix by opcode)."""
    ins = [(int(m.group(1), 16), m.group(2).strip())
           for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*?);", sass)]
    out = []
    for addr, text in ins:
        m = re.search(r"BRA\s+(?:`\()?0x([0-9a-f]+)", text)
        if m and int(m.group(1), 16) < addr:
            body = [t for a, t in ins if int(m.group(1), 16) <= a <= addr]
            ops = [re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0] for t in body]
            out.append((len(body), collections.Counter(ops)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", type=Path, help="a KernelBench level directory")
    ap.add_argument("only", help="a problem name prefix")
    ap.add_argument("--move", type=int, default=0, help="the engineer's move index for the problem's single op")
    ap.add_argument("--set", default="{}", help="JSON: parameters changed on that move")
    ap.add_argument("--keep", type=Path, help="write each kernel's SASS and TTGIR here")
    ap.add_argument("--hopper", action="store_true", help="the candidate takes its TMA paths (kc_tma_gpu says yes)")
    args = ap.parse_args()
    problem = next(p for p in load_problem_dir(args.suite) if p.name.startswith(args.only))
    engineer = BuiltinProposer("cuda")
    op = engineer.coverage(problem, "triton").single
    if op is None:
        raise SystemExit(f"{problem.name}: not a single op (this probe renders single ops)")
    params = engineer.moves(op, "triton")[args.move].params.but(**json.loads(args.set))
    print(problem.name, params.to_json())
    path = Path(tempfile.mkdtemp()) / "candidate.py"
    path.write_text(registry.render(op, problem.source, params))
    spec = importlib.util.spec_from_file_location("candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if args.hopper:
        module.kc_tma_gpu = lambda t: True
    log: list = []
    jitted = {name: value for name, value in vars(module).items() if isinstance(value, JITFunction)}
    for name, value in jitted.items():
        setattr(module, name, Recorder(value, log))
    scope: dict = {}
    exec(problem.source, scope)
    model = module.ModelNew(*scope["get_init_inputs"]()).to("meta")
    model(*[t.to("meta") if isinstance(t, torch.Tensor) else t for t in scope["get_inputs"]()])
    for name, value in jitted.items():  # back: a kernel that calls a jitted helper compiles against it
        setattr(module, name, value)
    for fn, grid, largs, kw in log:
        compiled = compile_launch(fn, largs, kw)
        work = Path(tempfile.mkdtemp())
        (work / "k.cubin").write_bytes(compiled.asm["cubin"])
        usage = subprocess.run([BIN / "cuobjdump", "-res-usage", work / "k.cubin"], capture_output=True,
                               text=True).stdout
        sass = subprocess.run([BIN / "cuobjdump", "-sass", work / "k.cubin"], capture_output=True, text=True).stdout
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            (args.keep / f"{fn.__name__}.sass").write_text(sass)
            (args.keep / f"{fn.__name__}.ttgir").write_text(compiled.asm["ttgir"])
        res = re.search(r"REG:\d+ STACK:\d+ SHARED:\d+ LOCAL:\d+", usage)
        total = len(re.findall(r"/\*[0-9a-f]{4,}\*/\s+[^;]*?;", sass))
        print(f"{fn.__name__} grid {grid} {kw}: {res.group(0) if res else usage.strip()}, {total} instructions")
        for n, mix in loops(sass):
            print(f"  loop of {n} instructions: {dict(mix.most_common())}")


if __name__ == "__main__":
    main()
