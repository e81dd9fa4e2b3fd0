"""The verifier on upstream KernelBench at its published sizes (4–8 GB tensors): per problem the verdict, the
harness's memory (the estimate made before anything ran, the supervisor's and the worker's peaks), the lock
wait and the wall time; then the count of harness out-of-memory failures, which must be zero.

Each problem gets one candidate: the built-in engineer's first kernel where it covers the problem, else a
reference-calling one (the reference's own PyTorch, its output copied out by a Triton kernel; library kernels
admitted) — what matters here is that every problem the device can hold is evaluated to a verdict without the
harness running out of memory, and that one it cannot hold is refused once, as the problem's error.

    python benchmarks/kernelbench.py ../shared/kernelbench/level1 --out benchmarks/results/kernelbench-level1-h100.json
    python benchmarks/kernelbench.py ../shared/kernelbench/level1 --start 50 --merge OUT.json --out OUT.json
    python benchmarks/kernelbench.py ../shared/kernelbench/level2 --compile --shards 3 --out OUT.json

`--shards N` runs N processes on the one GPU, each over every N-th problem of the selection, and merges their
rows into OUT.json (each shard's own record is `OUT.shardK.json`, written as it goes). They share the device as
any evaluations do: checks overlap, timing phases hold the device's lock alone, so worker starts, Triton and
torch.compile compilation and checks of one shard overlap another's timing, and every timing is still taken
with the device to itself.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

import torch
from provenance import code

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
            "eager_ms": result.eager_ms, "speedup_eager": result.speedup_eager,
            "compile_ms": result.compile_ms, "speedup_compile": result.speedup_compile,
            "host": {name: {"median_ms": round(t.median_ms, 4), "host_ms": round(t.host_ms, 4),
                            "device_ms": round(t.device_ms, 4),
                            "lead_ms": round(t.lead_ms, 4) if t.lead_ms is not None else None}
                     for name, t in (("candidate", result.runtime), ("eager", result.eager),
                                     ("compile", result.compiled)) if t is not None and t.host_ms is not None},
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
    ap.add_argument("--only", default="", help="comma-separated name fragments (a bare number, 67 or 67_, names one problem)")
    ap.add_argument("--budget", type=float, default=1.0, help="timing budget per candidate, seconds")
    ap.add_argument("--minutes", type=float, default=0.0, help="stop starting problems after this long")
    ap.add_argument("--merge", type=Path, default=None, help="an earlier record whose rows are kept")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile's baseline (slow: it compiles)")
    ap.add_argument("--every", type=int, default=1, help="every k-th problem by number (a sample)")
    ap.add_argument("--shards", type=int, default=1, help="processes sharing the GPU, each over every N-th problem")
    ap.add_argument("--shard", default="", help=argparse.SUPPRESS)  # "K/N": this process is shard K of N
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.shards > 1 and not args.shard:
        run_shards(args)
        return

    problems = select(args)
    rows = json.loads(args.merge.read_text())["rows"] if args.merge and args.merge.exists() else []
    defer_over = None
    if args.shard and torch.cuda.is_available():  # a problem bigger than its share of the device waits for the end
        # (0.8: the estimate is an estimate, and the other shards' workers hold memory of their own)
        defer_over = 0.8 * torch.cuda.get_device_properties(0).total_memory / int(args.shard.split("/")[1])
    judge(args, problems, rows, defer_over)


def number(name: str) -> int:
    """A KernelBench problem's number (its file name's prefix), 0 for a name without one."""
    base = name.split("/")[-1]
    return int(base.split("_")[0]) if base[0].isdigit() else 0


def matches(fragment: str, name: str) -> bool:
    """--only: a problem's number ("67_", "67") names that problem alone (not 167_ or 67 inside another name); any
    other fragment matches anywhere in the name."""
    if fragment.rstrip("_").isdigit():
        return name.split("_")[0] == fragment.rstrip("_")
    return fragment in name


def select(args) -> list:
    problems = sorted(load_problem_dir(args.suite), key=lambda p: number(p.name))
    if args.only:
        problems = [p for p in problems if any(matches(k, p.name) for k in args.only.split(","))]
    problems = problems[args.start::args.every]
    problems = problems[:args.limit] if args.limit else problems
    if args.shard:
        k, n = (int(v) for v in args.shard.split("/"))
        problems = problems[k::n]
    return problems


def judge(args, problems: list, rows: list, defer_over: float | None = None) -> None:  # noqa: C901
    """Evaluate each problem not in `rows` yet, appending a row each and writing the record as it goes. With
    `defer_over` (bytes), a problem whose memory estimate is larger is not judged here but listed in the record's
    `deferred`: beside other shards on the device it could be refused for memory the others hold."""
    done = {r["problem"] for r in rows}
    deferred: list[str] = []
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
            if defer_over is not None and need.total > defer_over:
                deferred.append(problem.name)
                print(f"{problem.name}: needs {need.total / GiB:.1f} GiB, over this shard's share: judged alone at "
                      "the end", flush=True)
                continue
            candidate, kind = candidate_for(problem, engineer)
            result = verifier.evaluate(problem, candidate)
            rows.append(row_for(problem, kind, result, time.monotonic() - t0))
            r = rows[-1]
            print(f"{problem.name}: {kind} {r['status']} {r['reasons'][:2]} need {need.total / GiB:.1f} GiB, peaks "
                  f"{r['supervisor_peak_gib']}/{r['worker_peak_gib']} GiB, {r['wall_s']} s", flush=True)
            _write(args, rows, deferred)
    _write(args, rows, deferred)
    ooms = [r["problem"] for r in rows if r.get("harness_oom")]
    print(f"{len(rows)} problems; statuses {_count(rows)}; harness out-of-memory: {len(ooms)} {ooms}")


def run_shards(args) -> None:
    """Start `args.shards` copies of this script on disjoint thirds (halves, …) of the selection, wait for
    them, and write their rows, in problem order, as one record."""
    argv = list(sys.argv[1:])  # --merge travels to each shard, which skips the problems done there
    i = argv.index("--shards")
    del argv[i:i + 2]
    outs, procs, started = [], [], time.monotonic()
    for k in range(args.shards):
        out = args.out.with_suffix(f".shard{k}.json")
        j = argv.index("--out")
        shard_argv = argv[:j] + argv[j + 2:] + ["--out", str(out), "--shard", f"{k}/{args.shards}"]
        outs.append(out)
        procs.append(subprocess.Popen([sys.executable, __file__, *shard_argv]))
    codes = [p.wait() for p in procs]
    records = [json.loads(out.read_text()) for out in outs if out.exists()]
    seen: dict = {}
    for r in (r for record in records for r in record["rows"]):  # a row carried by --merge is in every shard's record
        seen[r["problem"]] = r
    rows = sorted(seen.values(), key=lambda r: number(r["problem"]))
    deferred = {name for record in records for name in record.get("deferred", [])}
    args.method_note = (f"{args.shards} processes sharing the device (timing phases under its lock); problems "
                        f"estimated over 0.8/{args.shards} of its memory judged alone after them")
    print(f"{len(rows)} problems from {args.shards} shards (exit codes {codes}); statuses {_count(rows)}; "
          f"{len(deferred)} judged alone now", flush=True)
    if deferred:  # within what is left of --minutes; any not started stay out of the record, for a later --merge
        left = args.minutes - (time.monotonic() - started) / 60 if args.minutes else 0.0
        if not args.minutes or left > 0:
            args.minutes = left
            judge(args, [p for p in select(args) if p.name in deferred], rows)
        else:
            print(f"time is up: {sorted(deferred)} not judged (run again with --merge {args.out})", flush=True)
        rows.sort(key=lambda r: number(r["problem"]))
    _write(args, rows)
    print(f"{len(rows)} problems; statuses {_count(rows)}")


def _count(rows) -> dict:
    out: dict = {}
    for r in rows:
        out[r["status"]] = out.get(r["status"], 0) + 1
    return out


def _write(args, rows, deferred=()) -> None:
    props = torch.cuda.get_device_properties(0) if torch.cuda.is_available() else None
    record = {"device": props.name if props else "cpu", "memory_gib": round(props.total_memory / GiB, 1) if props else None,
              "torch": torch.__version__, "date": datetime.date.today().isoformat(), "code": code(),
              "suite": str(args.suite),
              "method": "kernelcraft verifier, default trials, timing budget %.1f s, %s%s" % (
                  args.budget, "torch.compile baseline timed" if args.compile else "no torch.compile baseline",
                  f"; {getattr(args, 'method_note', '')}" if getattr(args, "method_note", "") else ""),
              "policy": "strict", **({"fast_1_and_geomeans": bench_metrics([{**r, "correct": r.get("status") == "ok"}
                                                                             for r in rows])} if args.compile else {}),
              "statuses": _count(rows), "harness_oom": sum(bool(r.get("harness_oom")) for r in rows),
              **({"deferred": list(deferred)} if deferred else {}), "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
