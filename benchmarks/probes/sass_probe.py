"""Static look at a problem's kernels on sm_90 with no GPU: the built-in engineer's candidate on one of its moves,
its forward run on meta tensors at the problem's published sizes with every Triton kernel replaced by a recorder,
each recorded launch compiled ahead of time for sm_90a with the specialization a launch would get (16-aligned
pointers, integers divisible by 16, ones as constants), and per kernel: registers, spills and shared memory
(cuobjdump -res-usage) and each loop's instruction count and mix (cuobjdump -sass). Counts, not timings: what a
kernel costs per element, and how many programs an SM can hold. `--hopper`: the candidate's kc_tma_gpu says yes,
so it takes its TMA paths (tensor descriptors of meta tensors, compiled as the block shapes they carry).

    python benchmarks/probes/sass_probe.py shared/kernelbench/level1 51_ --move 0
    python benchmarks/probes/sass_probe.py shared/kernelbench/level1 47_ --move 0 --set '{"num_warps": 16}' --keep /tmp/sass
    python benchmarks/probes/sass_probe.py shared/kernelbench/level1 55_ --hopper --set '{"compiled_sizes": true}'
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import tempfile
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "0"  # compiled kernels, not the interpreter's

import torch  # noqa: E402

from kernelcraft.backends.triton_static import compile_launch, loops, recorded, resources, sass  # noqa: E402
from kernelcraft.problems import load_problem_dir  # noqa: E402
from kernelcraft.propose.builtin import registry  # noqa: E402
from kernelcraft.propose.builtin.proposer import BuiltinProposer  # noqa: E402


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
    scope: dict = {}
    exec(problem.source, scope)
    model = module.ModelNew(*scope["get_init_inputs"]()).to("meta")
    inputs = [t.to("meta") if isinstance(t, torch.Tensor) else t for t in scope["get_inputs"]()]
    for launch in recorded(module, lambda: model(*inputs)):
        compiled = compile_launch(launch)
        code = sass(compiled)
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            (args.keep / f"{launch.name}.sass").write_text(code)
            (args.keep / f"{launch.name}.ttgir").write_text(compiled.asm["ttgir"])
        res = resources(compiled)
        total = len(re.findall(r"/\*[0-9a-f]{4,}\*/\s+[^;]*?;", code))
        print(f"{launch.name} grid {launch.grid} {launch.kwargs}: REG:{res.registers} SHARED:{res.shared} "
              f"LOCAL:{res.local}, {total} instructions")
        for n, mix in loops(code):
            print(f"  loop of {n} instructions: {dict(mix.most_common())}")


if __name__ == "__main__":
    main()
