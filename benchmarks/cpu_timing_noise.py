"""How noisy CPU timings are, with the worker's intra-op threads pinned to one and left at torch's default.

    python benchmarks/cpu_timing_noise.py --n 6 --out benchmarks/results/cpu-timing-noise-<date>.json

Evaluates level1/relu (SMALL_SIZES) with an honest Triton candidate (tests/fixtures/relu_triton.py,
run by Triton's interpreter) N times per setting, each evaluation with a fresh baseline (its own cache),
and records per setting: eager's CV within an evaluation (the clean baseline and the control timed beside
the candidate), the candidate's CV, and the spread of eager's medians and of the speedups across the N
evaluations. These are CPU timings: they say how far a CPU speedup can be trusted, nothing about a GPU.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))

from kernelcraft.candidate import Candidate  # noqa: E402
from kernelcraft.problems import load_problem  # noqa: E402
from kernelcraft.verify import TimingConfig, Verifier, VerifyConfig  # noqa: E402

CANDIDATE = ROOT.parent / "tests" / "fixtures" / "relu_triton.py"


def evaluate_once(cpu_threads: int | None, budget_s: float) -> dict:
    with tempfile.TemporaryDirectory() as cache:  # a fresh baseline every time: its spread is measured
        config = VerifyConfig(small=True, compile_baseline=False, cache_dir=Path(cache), cpu_threads=cpu_threads,
                              timing=TimingConfig(budget_s=budget_s))
        with Verifier("cpu", config) as verifier:
            r = verifier.evaluate(load_problem("level1/relu"), Candidate.from_file(CANDIDATE))
    if r.status != "ok":
        return {"status": r.status, "reasons": r.reasons, "message": r.message[:300]}
    return {"status": "ok", "eager_ms": r.eager.median_ms, "eager_cv": r.eager.cv, "eager_iqr_ms": r.eager.iqr_ms,
            "control_ms": r.eager_control.median_ms, "control_cv": r.eager_control.cv,
            "candidate_ms": r.runtime.median_ms, "candidate_cv": r.runtime.cv,
            "candidate_iqr_ms": r.runtime.iqr_ms, "speedup_eager": r.speedup_eager}


def spread(values: list[float]) -> dict:
    return {"min": min(values), "max": max(values), "max_over_min": max(values) / min(values),
            "cv": statistics.pstdev(values) / statistics.fmean(values)}


def summarise(rows: list[dict]) -> dict:
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        return {"evaluations": len(rows), "ok": 0}
    med = lambda k: statistics.median(r[k] for r in ok)  # noqa: E731
    return {"evaluations": len(rows), "ok": len(ok), "median_eager_cv": med("eager_cv"),
            "median_control_cv": med("control_cv"), "median_candidate_cv": med("candidate_cv"),
            "eager_medians_ms": spread([r["eager_ms"] for r in ok]),
            "candidate_medians_ms": spread([r["candidate_ms"] for r in ok]),
            "speedups_eager": spread([r["speedup_eager"] for r in ok])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=6, help="evaluations per setting")
    ap.add_argument("--budget", type=float, default=2.0, help="timing budget per timing phase, seconds")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    settings = {"threads_default": None, "threads_1": 1}
    out = {"what": "CPU timings (not GPU): level1/relu SMALL_SIZES, honest Triton candidate under TRITON_INTERPRET",
           "device": f"cpu ({os.cpu_count()} cores, shared with other work; "
                     f"{platform.processor() or platform.machine()})",
           "torch": str(torch.__version__), "date": datetime.date.today().isoformat(),
           "timing_budget_s": args.budget, "settings": {}}
    for name, threads in settings.items():
        rows = []
        for i in range(args.n):  # settings alternate by block; each block is N back-to-back evaluations
            rows.append(evaluate_once(threads, args.budget))
            print(name, i, json.dumps(rows[-1]), file=sys.stderr, flush=True)
        out["settings"][name] = {"cpu_threads": threads, "summary": summarise(rows), "evaluations": rows}
    text = json.dumps(out, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
