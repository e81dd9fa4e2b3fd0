"""The verifier on upstream KernelBench at its published sizes (4–8 GB tensors): per problem the verdict, the
harness's memory (the estimate made before anything ran, the supervisor's and the worker's peaks), the lock
wait and the wall time; then the count of harness out-of-memory failures, which must be zero.

Each problem gets one candidate: the built-in engineer's first kernel where it covers the problem, else a
reference-calling one (the reference's own PyTorch, its output copied out by a Triton kernel; library kernels
admitted) — what matters here is that every problem the device can hold is evaluated to a verdict without the
harness running out of memory, and that one it cannot hold is refused once, as the problem's error.

    python benchmarks/kernelbench.py ../shared/kernelbench/level1 --out benchmarks/results/kernelbench-level1-h100.json
    python benchmarks/kernelbench.py ../shared/kernelbench/level1 --start 50 --merge OUT.json --out OUT.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

import torch

from kernelcraft.candidate import Candidate
from kernelcraft.metrics import bench_metrics
from kernelcraft.problems import load_problem_dir
from kernelcraft.propose.base import Request
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.propose.parse import parse_kernel
from kernelcraft.verify import TimingConfig, Verifier, VerifyConfig
from kernelcraft.verify.memory import GiB, ProblemTooLarge

PASSTHROUGH = '''
import torch
import triton
import triton.language as tl

{problem}


@triton.jit
def copy_out_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def _copied(t):
    src = t.contiguous()
    out = torch.empty_like(src)
    if src.numel():
        copy_out_kernel[(triton.cdiv(src.numel(), 1024),)](src, out, src.numel(), BLOCK=1024)
    return out


class ModelNew(Model):
    def forward(self, *args):
        out = super().forward(*args)
        return type(out)(_copied(o) for o in out) if isinstance(out, (tuple, list)) else _copied(out)
'''


def candidate_for(problem, engineer: BuiltinProposer) -> tuple[Candidate, str]:
    """The built-in engineer's first kernel, or the reference-calling candidate, and which it is."""
    answer = engineer.ask(Request("implement", problem, "triton"))
    if answer.text:
        parsed = parse_kernel(answer.text)
        if parsed.source:
            return Candidate(parsed.source, f"builtin-{problem.name.replace('/', '-')}"), "builtin"
    return Candidate(PASSTHROUGH.format(problem=problem.source), f"reference-{problem.name.replace('/', '-')}"), \
        "reference"


def row_for(problem, kind: str, result, wall: float) -> dict:
    memory = result.memory or {}
    gib = lambda v: round(v / GiB, 3) if v else None  # noqa: E731
    return {"problem": problem.name, "candidate": kind, "status": str(result.status), "reasons": result.reasons,
            "message": _brief(result.message), "harness_oom": "harness_oom" in result.reasons,
            "estimate_gib": gib(memory.get("estimate")), "supervisor_peak_gib": gib(memory.get("supervisor_peak_reserved")),
            "worker_peak_gib": gib(memory.get("worker_peak_reserved")), "trials": result.trials,
            "timed_checks": result.timed_checks, "runtime_ms": result.runtime_ms,
            "eager_ms": result.eager.median_ms if result.eager else None, "speedup_eager": result.speedup_eager,
            "compile_ms": result.compile_ms, "speedup_compile": result.speedup_compile,
            "lock_wait_s": result.phases.get("lock_wait"), "phases": result.phases, "wall_s": round(wall, 2)}


def _brief(message: str | None, keep: int = 600) -> str:
    """A message short enough for the record: a traceback's end (where its exception is), else its start."""
    message = message or ""
    if len(message) <= keep:
        return message
    return "…" + message[-keep:] if message.startswith("Traceback") else message[:keep] + "…"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", type=Path, help="a KernelBench level directory")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--start", type=int, default=0, help="skip the first N problems (sorted by number)")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated name fragments")
    ap.add_argument("--budget", type=float, default=1.0, help="timing budget per candidate, seconds")
    ap.add_argument("--minutes", type=float, default=0.0, help="stop starting problems after this long")
    ap.add_argument("--merge", type=Path, default=None, help="an earlier record whose rows are kept")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile's baseline (slow: it compiles)")
    ap.add_argument("--every", type=int, default=1, help="every k-th problem by number (a sample)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    number = lambda p: int(p.name.split("/")[-1].split("_")[0]) if p.name.split("/")[-1][0].isdigit() else 0  # noqa: E731
    problems = sorted(load_problem_dir(args.suite), key=number)
    if args.only:
        problems = [p for p in problems if any(k in p.name for k in args.only.split(","))]
    problems = problems[args.start::args.every]
    problems = problems[:args.limit] if args.limit else problems
    rows = json.loads(args.merge.read_text())["rows"] if args.merge and args.merge.exists() else []
    done = {r["problem"] for r in rows}
    engineer = BuiltinProposer(args.device)
    config = VerifyConfig(compile_baseline=args.compile, timing=TimingConfig(budget_s=args.budget), allow_library=True)
    started = time.monotonic()
    with Verifier(args.device, config) as verifier:
        for problem in problems:
            if problem.name in done:
                continue
            if args.minutes and time.monotonic() - started > args.minutes * 60:
                print(f"time is up after {len(rows)} problems", flush=True)
                break
            t0 = time.monotonic()
            try:
                need = verifier.admit(problem)
            except ProblemTooLarge as exc:
                rows.append({"problem": problem.name, "status": "too_large", "reasons": ["problem_too_large"],
                             "message": str(exc), "harness_oom": False, "wall_s": round(time.monotonic() - t0, 2)})
                print(f"{problem.name}: too large: {exc}", flush=True)
                continue
            except Exception as exc:  # noqa: BLE001 - a problem that does not load is recorded, not fatal
                rows.append({"problem": problem.name, "status": "problem_error", "message": f"{type(exc).__name__}: {exc}"[:400],
                             "harness_oom": False, "wall_s": round(time.monotonic() - t0, 2)})
                print(f"{problem.name}: problem error: {exc}", flush=True)
                continue
            candidate, kind = candidate_for(problem, engineer)
            result = verifier.evaluate(problem, candidate)
            rows.append(row_for(problem, kind, result, time.monotonic() - t0))
            r = rows[-1]
            print(f"{problem.name}: {kind} {r['status']} {r['reasons'][:2]} need {need.total / GiB:.1f} GiB, peaks "
                  f"{r['supervisor_peak_gib']}/{r['worker_peak_gib']} GiB, {r['wall_s']} s", flush=True)
            _write(args, rows)
    _write(args, rows)
    ooms = [r["problem"] for r in rows if r.get("harness_oom")]
    print(f"{len(rows)} problems; statuses {_count(rows)}; harness out-of-memory: {len(ooms)} {ooms}")


def _count(rows) -> dict:
    out: dict = {}
    for r in rows:
        out[r["status"]] = out.get(r["status"], 0) + 1
    return out


def _write(args, rows) -> None:
    props = torch.cuda.get_device_properties(0) if torch.cuda.is_available() else None
    record = {"device": props.name if props else "cpu", "memory_gib": round(props.total_memory / GiB, 1) if props else None,
              "torch": torch.__version__, "date": datetime.date.today().isoformat(), "suite": str(args.suite),
              "method": "kernelcraft verifier, default trials, timing budget %.1f s, %s" % (
                  args.budget, "torch.compile baseline timed" if args.compile else "no torch.compile baseline"),
              "policy": "strict", **({"fast_1_and_geomeans": bench_metrics([{**r, "correct": r.get("status") == "ok"}
                                                                             for r in rows])} if args.compile else {}),
              "statuses": _count(rows), "harness_oom": sum(bool(r.get("harness_oom")) for r in rows), "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
