"""Where a built-in candidate's time goes, per kernel, beside the reference's: for each problem of a KernelBench
directory the built-in engineer covers, at its published sizes, its first candidate's forward and the reference's
(triton.testing.do_bench, CUDA events, median), each kernel's own device time in both (torch.profiler), and the
candidate's largest error against the reference relative to the reference's largest magnitude. It ranks the work:
a chain whose producer kernel is slower than the library's wants a better producer, one whose extra kernels cost
more than the reference's pointwise tail wants fusion.

Not the verifier: candidates run in this process, on one fixed input draw, with no guard. A diagnosis, not a
result; results come from `kernelcraft bench` or benchmarks/builtin.py.

    python benchmarks/chain_profile.py ../shared/kernelbench/level2 --out $OUT/chain-profile-level2.json
    python benchmarks/chain_profile.py ../shared/kernelbench/level2 --only 67_,8_ --out OUT.json
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib.util
import json
import tempfile
import time
import traceback
from pathlib import Path

import torch
import triton
import triton.testing
from torch.profiler import ProfilerActivity, profile

from kernelcraft.problems import load_problem_dir
from kernelcraft.propose.base import Request
from kernelcraft.propose.builtin.proposer import BuiltinProposer, CoverageError
from kernelcraft.propose.parse import parse_kernel
from kernelcraft.verify.policy import POLICIES, reference_math


def kernels(fn, calls: int = 5) -> list[dict]:
    """Each CUDA kernel `fn` launches: name, launches per call and device ms per call, most expensive first."""
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        total = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if total and e.count and e.device_type == torch.autograd.DeviceType.CUDA:
            rows.append({"kernel": e.key[:80], "per_call": e.count / calls, "ms": round(total / 1e3 / calls, 4)})
    return sorted(rows, key=lambda r: -r["ms"])


def load_module(source: str, name: str):
    path = Path(tempfile.mkdtemp(prefix="kc-profile-")) / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def profile_problem(problem, engineer: BuiltinProposer, rep_ms: int, exact_fp32: bool) -> dict:
    row: dict = {"problem": problem.name}
    try:
        analysis = engineer.coverage(problem, "triton")
    except CoverageError as exc:
        return {**row, "covered": False, "reason": str(exc)[:300]}
    ops = analysis.chain or [analysis.single]
    row["ops"] = [op.kind + (f"[{','.join(str(s[0]) for s in op.detail['steps'])}]" if op.detail.get("steps") else "")
                  + ("+pool" if op.detail.get("pool") else "") for op in ops]
    answer = engineer.ask(Request("implement", problem, "triton"))
    source = parse_kernel(answer.text).source
    ref_module = load_module(problem.source, "kc_reference")
    cand_module = load_module(source, "kc_candidate")
    torch.manual_seed(0)
    init = ref_module.get_init_inputs()
    reference = ref_module.Model(*init).cuda().eval()  # as the verifier runs both
    candidate = cand_module.ModelNew(*init).cuda().eval()
    candidate.load_state_dict(reference.state_dict())
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in ref_module.get_inputs()]
    row["input_gb"] = round(sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor)) / 1e9, 3)
    with torch.no_grad():
        with reference_math(exact_fp32):
            ref = reference(*inputs)
        out = candidate(*inputs)
        scale = ref.abs().max().item() or 1.0
        row["max_rel_error"] = float(((out.float() - ref.float()).abs().max() / scale).item())
        del ref, out
        with reference_math(exact_fp32):
            row["eager_ms"] = round(triton.testing.do_bench(lambda: reference(*inputs), warmup=10, rep=rep_ms), 4)
            row["eager_kernels"] = kernels(lambda: reference(*inputs))
        row["candidate_ms"] = round(triton.testing.do_bench(lambda: candidate(*inputs), warmup=10, rep=rep_ms), 4)
        row["speedup_eager"] = round(row["eager_ms"] / row["candidate_ms"], 3)
        row["candidate_kernels"] = kernels(lambda: candidate(*inputs))
    return {**row, "covered": True}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", type=Path, help="a KernelBench level directory")
    ap.add_argument("--only", default="", help="comma-separated name fragments (a problem matches any)")
    ap.add_argument("--rep-ms", type=int, default=100, help="do_bench's measuring time per forward")
    ap.add_argument("--policy", default="strict", choices=sorted(POLICIES),
                    help="the reference's fp32 math as the verifier runs it under this policy (strict: TF32 off)")
    ap.add_argument("--minutes", type=float, default=0.0, help="stop starting problems after this long")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    number = lambda p: int(p.name.split("_")[0]) if p.name[0].isdigit() else 0  # noqa: E731
    problems = sorted(load_problem_dir(args.suite), key=number)
    if args.only:
        problems = [p for p in problems if any(p.name.startswith(k) for k in args.only.split(","))]
    engineer = BuiltinProposer("cuda", precision_moves=POLICIES[args.policy].allow_tf32)
    rows, started = [], time.monotonic()
    for problem in problems:
        if args.minutes and time.monotonic() - started > 60 * args.minutes:
            print(f"time is up after {len(rows)} problems", flush=True)
            break
        t0 = time.monotonic()
        try:
            row = profile_problem(problem, engineer, args.rep_ms, POLICIES[args.policy].allow_tf32 is False)
        except Exception as exc:  # noqa: BLE001 - one problem's failure is recorded, the others go on
            row = {"problem": problem.name, "covered": True, "error": f"{type(exc).__name__}: {exc}"[:300],
                   "traceback": traceback.format_exc()[-1200:]}
        row["wall_s"] = round(time.monotonic() - t0, 1)
        rows.append(row)
        top = ", ".join(f"{k['kernel'][:32]} {k['ms']}" for k in row.get("candidate_kernels", [])[:3])
        print(f"{problem.name}: {row.get('speedup_eager', row.get('error') or row.get('reason', ''))} "
              f"eager {row.get('eager_ms')} cand {row.get('candidate_ms')} [{top}]", flush=True)
        gc.collect()
        torch.cuda.empty_cache()
        write(args, rows)
    write(args, rows)


def write(args, rows: list[dict]) -> None:
    props = torch.cuda.get_device_properties(0)
    record = {"what": "built-in engineer's first candidate per problem, profiled beside the reference (a diagnosis: "
                      "in-process, one input draw, no verifier)",
              "device": props.name, "torch": torch.__version__, "triton": triton.__version__,
              "date": datetime.date.today().isoformat(), "suite": str(args.suite),
              "timing_method": "triton.testing.do_bench (CUDA events, median); torch.profiler device time per kernel",
              "policy": args.policy, "reference_fp32": POLICIES[args.policy].to_dict()["reference_fp32"],
              "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
