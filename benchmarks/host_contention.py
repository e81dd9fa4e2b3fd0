"""What one GPU's verifier loses when the host's other GPUs judge at the same time (no Ray): this machine's verifier
on one GPU alone, then one per GPU at once, each in its own process, each judging the same built-in kernels.

    PYTHONPATH=src python benchmarks/host_contention.py level1/softmax --per-gpu 48 --out c.json

Each process profiles its own side (cProfile: the supervisor's checks, its waits on the worker's pipe, its torch
calls) and records each candidate's phases; the record compares the alone pass with each GPU of the together pass,
function by function (the largest growths first), with the device, date and torch version.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import provenance  # noqa: E402


def one_gpu(args) -> None:
    """In a child: judge the candidates on the one GPU it sees, profiled; write its record to args.child."""
    import torch

    from scale import builtin_candidates

    from kernelcraft.inputs import as_problem
    from kernelcraft.verify import Job, TimingConfig, Verifier, VerifyConfig

    problem = as_problem(args.problem)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a check of this script, not a measurement
    candidates = builtin_candidates(problem, "triton", device, args.per_gpu + 2)
    config = VerifyConfig(size="auto", compile_baseline=False, timing=TimingConfig(budget_s=args.timing_budget),
                          cache_dir=Path(tempfile.mkdtemp(prefix="kc-contention-")))
    with Verifier("cuda:0" if device == "cuda" else "cpu", config) as verifier:
        verifier.evaluate_many([Job(problem, c) for c in candidates[:2]])  # warm: baselines, the first worker
        Path(args.child + ".ready").touch()
        while not Path(args.go).exists():  # every process starts its timed pass together
            time.sleep(0.01)
        profile = cProfile.Profile()  # in the device's driver thread, around each evaluation (cProfile sees one thread)
        supervisor = verifier.supervisors[0]
        evaluate = supervisor.evaluate

        def profiled(*a, **k):
            profile.enable()
            try:
                return evaluate(*a, **k)
            finally:
                profile.disable()

        supervisor.evaluate = profiled
        t0 = time.perf_counter()
        results = verifier.evaluate_many([Job(problem, c) for c in candidates[2:]])
        wall = time.perf_counter() - t0
    stats = pstats.Stats(profile)
    functions = {f"{Path(f).name}:{line}:{name}": {"tottime": round(tt, 4), "cumtime": round(ct, 4), "calls": nc}
                 for (f, line, name), (cc, nc, tt, ct, _) in stats.stats.items() if ct >= 0.02 or tt >= 0.005}
    phases = sorted({k for r in results for k in r.phases})
    Path(args.child).write_text(json.dumps({
        "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "wall_s": round(wall, 3), "per_minute": round(60 * len(results) / wall, 2),
        "statuses": sorted({str(r.status) for r in results}),
        "mean_phases_s": {k: round(statistics.mean(r.phases.get(k, 0.0) for r in results), 4) for k in phases},
        "functions": functions}))


def together(args, gpus: list[int], tmp: Path) -> list[dict]:
    go = tmp / f"go-{len(gpus)}"
    children = []
    for g in gpus:
        child = tmp / f"child-{len(gpus)}-{g}.json"
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(g)}
        cmd = [sys.executable, __file__, args.problem, "--per-gpu", str(args.per_gpu), "--timing-budget",
               str(args.timing_budget), "--child", str(child), "--go", str(go), "--out", str(args.out)]
        children.append((child, subprocess.Popen(cmd, env=env)))
    while not all(Path(str(c) + ".ready").exists() for c, _ in children):
        if any(p.poll() is not None for _, p in children):
            raise SystemExit("a child process ended before its timed pass")
        time.sleep(0.05)
    go.touch()
    for _, p in children:
        p.wait()
    return [json.loads(c.read_text()) for c, _ in children]


def growth(alone: dict, other: dict, top: int = 25) -> list[dict]:
    """The functions whose own time grew most from `alone` to `other` (seconds over the pass)."""
    rows = []
    for key, f in other["functions"].items():
        a = alone["functions"].get(key, {"tottime": 0.0, "cumtime": 0.0})
        rows.append({"function": key, "tottime_alone": a["tottime"], "tottime_together": f["tottime"],
                     "cumtime_alone": a["cumtime"], "cumtime_together": f["cumtime"], "calls": f["calls"]})
    rows.sort(key=lambda r: r["tottime_together"] - r["tottime_alone"], reverse=True)
    return rows[:top]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem")
    ap.add_argument("--per-gpu", type=int, default=48)
    ap.add_argument("--timing-budget", type=float, default=2.0)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--go", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        one_gpu(args)
        return
    import torch

    n = torch.cuda.device_count() or 2  # no GPU: two CPU processes (a check of this script)
    tmp = Path(tempfile.mkdtemp(prefix="kc-contention-run-"))
    alone = together(args, [0], tmp)[0]
    print(f"alone: {alone['per_minute']} candidates/min, phases {alone['mean_phases_s']}", file=sys.stderr)
    all_gpus = together(args, list(range(n)), tmp)
    for r in all_gpus:
        print(f"GPU {r['gpu']} of {n}: {r['per_minute']} candidates/min, phases {r['mean_phases_s']}", file=sys.stderr)
    record = {"date": datetime.date.today().isoformat(), "torch": torch.__version__, "device": alone["device"],
              "gpus": n, "cpus": os.cpu_count(), "problem": args.problem, "per_gpu": args.per_gpu,
              "code": provenance.code(),
              "method": "wall clock of Verifier.evaluate_many per process after a warm-up of 2 candidates; cProfile of "
                        "each process's own side",
              "alone": alone, "together": all_gpus,
              "ratio": round(statistics.mean(r["per_minute"] for r in all_gpus) / alone["per_minute"], 3),
              "growth_gpu0": growth(alone, all_gpus[0])}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: record[k] for k in ("device", "gpus", "ratio")}), file=sys.stderr)


if __name__ == "__main__":
    main()
