"""The built-in kernel engineer (no model) driven by `tree`, over the seed problems and every level-1
problem it covers (or over a KernelBench directory at its published sizes, --dir): per problem eager,
torch.compile and best-kernel times, speedups, roofline fraction, rounds, candidates tried and wall time; then
per level fast_1 and fast_1.5 and the geomeans (problems it does not cover count as not fast, as KernelBench
counts them).

    python benchmarks/builtin.py --device cuda --out benchmarks/results/builtin-h100.json
    python benchmarks/builtin.py --dir ../shared/kernelbench/level2 --every 5 --rounds 2 --out OUT.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import tempfile
import time
from pathlib import Path

import torch

from kernelcraft.metrics import bench_metrics
from kernelcraft.problems import load_problem, load_problem_dir, suite_names
from kernelcraft.propose.builtin.proposer import BuiltinProposer, CoverageError
from kernelcraft.search import Budget, RunConfig, start_run
from kernelcraft.spec import RunSpec
from kernelcraft.store import Store
from kernelcraft.verify import TimingConfig, Verifier, VerifyConfig
from kernelcraft.verify.policy import get_policy

SEEDS = ["level1/layernorm", "level1/softmax", "level1/matmul", "level1/conv2d_alexnet", "level2/conv2d_relu_maxpool"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--only", default="", help="comma-separated problem names")
    ap.add_argument("--suite", default="level1", help="the suite run after the seeds (level1, level2, level3)")
    ap.add_argument("--dir", type=Path, default=None,
                    help="a KernelBench level directory instead of the bundled suite (no seeds; rows named "
                         "<dir name>/<file>)")
    ap.add_argument("--every", type=int, default=1, help="with --dir: every k-th problem by number (a sample)")
    ap.add_argument("--timing-budget", type=float, default=6.0, help="the verifier's timing budget per candidate, s")
    ap.add_argument("--no-seeds", action="store_true", help="only the suite")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ideas", type=int, default=4)
    ap.add_argument("--small", action="store_true", help="the problems' SMALL_SIZES (CPU smoke runs)")
    ap.add_argument("--policy", default="strict", choices=["strict", "relaxed"],
                    help="relaxed admits the precision moves (TF32)")
    ap.add_argument("--minutes", type=float, default=4.0, help="wall-time budget per problem")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--merge", type=Path, default=None,
                    help="an earlier record (same device): its rows are kept and its problems not run again")
    args = ap.parse_args()

    names, loaded = problem_names(args)
    engineer = BuiltinProposer(args.device, precision_moves=get_policy(args.policy).allow_tf32)
    work = Path(tempfile.mkdtemp(prefix="kc-builtin-"))
    store = Store(work / "runs.db")
    rows = json.loads(args.merge.read_text())["rows"] if args.merge else []
    for row in rows:
        row.setdefault("policy", "strict")
    # A (problem, policy) already measured is kept; one recorded as not covered is measured again.
    done = {(r["problem"], r["policy"]) for r in rows if r["covered"]}
    names = [n for n in names if (n, args.policy) not in done]
    rows = [r for r in rows if r["covered"] or (r["problem"], r["policy"]) not in {(n, args.policy) for n in names}]
    config = VerifyConfig(policy=args.policy, small=args.small, timing=TimingConfig(budget_s=args.timing_budget))
    with Verifier(args.device, config) as verifier:
        for name in names:
            problem = loaded[name] if name in loaded else load_problem(name)
            try:
                engineer.coverage(problem, "triton")
            except CoverageError as exc:
                rows.append({"problem": name, "policy": args.policy, "covered": False, "reason": str(exc),
                             "correct": False})
                print(f"{name}: not covered ({exc})", flush=True)
                continue
            t0 = time.monotonic()
            out = start_run(store, problem, engineer, verifier,
                            RunSpec(RunConfig(strategy="tree", backend="triton", rounds=args.rounds, ideas=args.ideas,
                                      impls=1, budget=Budget(wall_s=60 * args.minutes))), out_dir=work)
            best = out.best.result if out.best else None
            row = {"problem": name, "policy": args.policy, "covered": True, "correct": bool(out.best), "run_id": out.run_id,
                   "eager_ms": best and best.eager_ms, "compile_ms": best and best.compile_ms,
                   "best_ms": best and best.runtime_ms, "speedup_eager": best and best.speedup_eager,
                   "speedup_compile": best and best.speedup_compile,
                   "roofline_fraction": best and best.roofline_fraction,
                   "best_idea": out.best.idea if out.best else None, "stop_reason": out.stop_reason, "rounds": len(out.trajectory),
                   "candidates": out.counters.candidates, "by_status": out.counters.by_status,
                   "wall_s": round(time.monotonic() - t0, 1), "trajectory": out.trajectory}
            rows.append(row)
            print(f"{name}: best {row['best_ms']} ms, {row['speedup_eager']}x eager, {row['speedup_compile']}x "
                  f"compile, roofline {row['roofline_fraction']}, {row['candidates']} candidates, "
                  f"{row['wall_s']} s", flush=True)
            write(make_record(rows, args), args.out)
    record = make_record(rows, args)
    for level, m in record["metrics"].items():
        print(f"{level}: {m['covered']}/{m['total']} covered; fast_1 {m['fast_p_eager']['1']:.3f}, "
              f"fast_1.5 {m['fast_p_eager']['1.5']:.3f} (vs eager); vs compile fast_1 {m['fast_p_compile']['1']:.3f}")
    write(record, args.out)


def problem_names(args) -> tuple[list[str], dict]:
    """The problems to run, by name, and those loaded from --dir by their row names."""
    only = [n.strip() for n in args.only.split(",") if n.strip()]
    if args.dir is None:
        return only or list(dict.fromkeys(([] if args.no_seeds else SEEDS)
                                          + [n for n in suite_names() if n.startswith(args.suite + "/")])), {}
    number = lambda p: int(p.name.split("_")[0]) if p.name[0].isdigit() else 0  # noqa: E731
    problems = sorted(load_problem_dir(args.dir), key=number)[::args.every]
    loaded = {f"{args.dir.name}/{p.name}": p for p in problems}
    if only:
        loaded = {n: p for n, p in loaded.items() if any(p.name.startswith(k) for k in only)}
    return list(loaded), loaded


def make_record(rows: list[dict], args: argparse.Namespace) -> dict:
    """The committed record: fast_p per level under the strict policy (relaxed rows, e.g. TF32 matmul,
    are listed beside)."""
    metrics = {}
    for level in sorted({r["problem"].split("/")[0] for r in rows}):
        strict = [r for r in rows if r["problem"].startswith(level + "/") and r["policy"] == "strict"]
        if strict:
            metrics[level] = {**bench_metrics(strict), "covered": sum(r["covered"] for r in strict), "total": len(strict)}
    return {
        "what": "built-in engineer (no model), tree strategy, Triton and CUDA (NVRTC) kernels",
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        "torch": torch.__version__, "date": datetime.date.today().isoformat(), "sizes": "small" if args.small else "full",
        "suite": str(args.dir) if args.dir else "bundled", "timing_budget_s": args.timing_budget,
        "timing_method": "cuda_events+l2_flush" if args.device.startswith("cuda") else "cpu_perf_counter",
        "metrics": metrics,
        "rows": rows,
    }


def write(record: dict, out: Path | None) -> None:
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=1, default=str))

if __name__ == "__main__":
    main()
