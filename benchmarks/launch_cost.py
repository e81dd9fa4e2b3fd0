"""What a kernel launch costs the host, against what the verifier's timing gives it to hide in: the host microseconds
a call of Triton kernels with 1 to 32 run-time arguments (and with 16 constexprs), of one eager torch op, and of the
built-in engineer's first kernel, eager and torch.compile on chosen KernelBench problems (`params_probe.host_us`:
calls issued while the GPU is held busy); and the device time of the L2 flush queued before each timed call.

A call's host time beyond the flush's device time leaves the GPU idle inside the call's timed window, so where a
problem's device time is tens of microseconds (level 1's 12), its timing is partly the host's.

    python benchmarks/launch_cost.py shared/kernelbench/level1 --only 12 --out launch.json
    python benchmarks/launch_cost.py shared/kernelbench/level1 --only 40 --profile 25 --out launch.json

`--profile N`: also where the engineer's kernel spends its host time, by Python function (cProfile over 50 calls
issued behind a device sleep, as `host_us` issues them): the N functions of most own time, microseconds a call.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import json
import pstats
from pathlib import Path

import torch
import triton
from params_probe import host_us, loaded, numbered
from provenance import code

from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.propose.base import Request
from kernelcraft.propose.parse import parse_kernel
from kernelcraft.verify.policy import set_exact_fp32

ARGS = (1, 8, 16, 32)


def kernels_source() -> str:
    """Trivial kernels (each program stores its id) taking n run-time ints, and one taking 16 constexprs."""
    out = ["import triton", "import triton.language as tl", ""]
    for n in ARGS:
        names = ", ".join(f"a{i}" for i in range(n))
        out += ["@triton.jit", f"def k{n}(x_ptr, {names}):", "    tl.store(x_ptr + tl.program_id(0), a0)", ""]
    names = ", ".join(f"c{i}: tl.constexpr" for i in range(16))
    out += ["@triton.jit", f"def kconst(x_ptr, {names}):", "    tl.store(x_ptr + tl.program_id(0), c0)", ""]
    return "\n".join(out)


def launches() -> dict:
    module = loaded(kernels_source(), "launch_cost")
    x = torch.zeros(1024, dtype=torch.int32, device="cuda")
    calls = {f"triton, {n} run-time ints": (lambda n=n: getattr(module, f"k{n}")[(8,)](x, *range(1, n + 1)))
             for n in ARGS}
    calls["triton, 16 constexprs"] = lambda: module.kconst[(8,)](x, *range(1, 17))
    calls["eager x.add_(1)"] = lambda: x.add_(1)
    return {name: host_us(fn, []) for name, fn in calls.items()}


def flush_us() -> float:
    """The device microseconds of the verifier's L2 flush (a zero_ of max(2 x L2, 256 MiB)), median of 20."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(max(2 * l2, 256 << 20) // 4, dtype=torch.float32, device="cuda")
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        flush.zero_()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return round(sorted(times)[len(times) // 2], 1)


def host_profile(fn, inputs: list, top: int, calls: int = 50) -> list[dict]:
    """The `top` functions of most own time over `calls` calls of `fn` issued behind a device sleep: where, how many
    calls a call, own and cumulative microseconds a call."""
    torch.cuda.synchronize()
    torch.cuda._sleep(200_000_000)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn(*inputs)
    profiler.disable()
    torch.cuda.synchronize()
    stats = pstats.Stats(profiler).stats
    rows = sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]
    return [{"where": f"{Path(file).name}:{line}:{name}", "calls": round(nc / calls, 2),
             "own_us": round(own * 1e6 / calls, 1), "cumulative_us": round(cum * 1e6 / calls, 1)}
            for (file, line, name), (_cc, nc, own, cum, _callers) in rows]


def problem_costs(problem, engineer, top: int = 0) -> dict:
    module = problem.load()
    model = module.Model(*module.get_init_inputs()).cuda().eval()
    source = parse_kernel(engineer.ask(Request("implement", problem, "triton")).text).source
    new = loaded(source, problem.name).ModelNew(*module.get_init_inputs()).cuda().eval()
    new.load_state_dict(model.state_dict())
    torch.manual_seed(0)
    with torch.device("cuda"):
        inputs = list(module.get_inputs())
    fns = {"eager": model, "compile": torch.compile(model), "first": new}
    with torch.no_grad():
        for fn in fns.values():
            fn(*inputs)
        row = {"problem": problem.name, "host_us": {name: host_us(fn, inputs) for name, fn in fns.items()}}
        if top:
            row["profile_first"] = host_profile(new, inputs, top)
        return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite", type=Path)
    ap.add_argument("--only", required=True, help="comma-separated problem numbers")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also the engineer's kernel's N Python functions of most own host time")
    args = ap.parse_args()
    set_exact_fp32(True)
    record = {"what": "host microseconds a call against the L2 flush's device time (benchmarks/launch_cost.py)",
              "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
              "date": datetime.date.today().isoformat(), "code": code(),
              "method": "params_probe.host_us: 50 calls issued behind torch.cuda._sleep, median of 3 runs",
              "flush_device_us": flush_us(), "launches": launches(), "problems": []}
    engineer = BuiltinProposer("cuda")
    for problem in numbered(args.suite, args.only):
        record["problems"].append(problem_costs(problem, engineer, args.profile))
        args.out.write_text(json.dumps(record, indent=1))
    args.out.write_text(json.dumps(record, indent=1))
    print(json.dumps({k: record[k] for k in ("flush_device_us", "launches", "problems")}, indent=1))


if __name__ == "__main__":
    main()
