"""One GPU's verifier under two code trees, alternated: where a candidate's seconds go, phase by phase.

Each tree judges the same built-in candidates for a problem on one device (no Ray), in a process of its own, the
trees taking turns `--turns` times so drift of the machine falls on both. Per tree: the median and mean of every
phase over all its candidates, the wall time per candidate, and how often the candidate's timing re-measured its
baseline or retried the trusted clock (notes on its results).

    python benchmarks/verifier_ab.py level1/softmax --tree old=/path/to/old/src --tree new=src --candidates 16 \
        --out benchmarks/results/verifier-ab-h100-DATE.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Run in a child process with the tree's src first on its path: judges the candidates, prints one JSON line.
CHILD = r'''
import json, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2]); sys.path.insert(2, sys.argv[2] + '/benchmarks')
import torch
import kernelcraft  # from the tree, before benchmarks.scale puts this checkout's src on the path
from benchmarks.scale import builtin_candidates
from kernelcraft.inputs import as_problem
from kernelcraft.verify import Job, TimingConfig, Verifier, VerifyConfig
problem = as_problem(sys.argv[3])
count, budget = int(sys.argv[4]), float(sys.argv[5])
candidates = builtin_candidates(problem, "triton", "cuda", count + 2)
config = VerifyConfig(size="auto", timing=TimingConfig(budget_s=budget), cache_dir=Path(tempfile.mkdtemp(prefix="kc-ab-")))
with Verifier("cuda:0", config) as verifier:
    verifier.evaluate_many([Job(problem, c) for c in candidates[:2]])  # warm: fork server, baselines, Triton cache
    start = time.perf_counter()
    results = verifier.evaluate_many([Job(problem, c) for c in candidates[2:]])
    wall = time.perf_counter() - start
rows = [{"status": str(r.status), "wall": r.wall_seconds, "phases": r.phases,
         "remeasured": any(n.startswith("baseline re-measured") for n in r.notes),
         "timing_samples": r.runtime.samples if r.runtime else None, "cv": r.runtime.cv if r.runtime else None}
        for r in results]
print("AB-JSON " + json.dumps({"wall_s": wall, "rows": rows, "device": torch.cuda.get_device_name(0),
                              "kernelcraft": kernelcraft.__file__}))
'''


def run_tree(src: str, problem: str, count: int, budget: float) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(Path(src).resolve()), str(ROOT), problem, str(count),
                           str(budget)], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""})
    for line in proc.stdout.splitlines():
        if line.startswith("AB-JSON "):
            return json.loads(line[len("AB-JSON "):])
    raise SystemExit(f"the tree at {src} failed:\n{proc.stderr[-3000:]}")


def summary(runs: list[dict]) -> dict:
    rows = [r for run in runs for r in run["rows"]]
    phases = sorted({k for r in rows for k in r["phases"]})
    return {"candidates": len(rows), "statuses": sorted({r["status"] for r in rows}),
            "seconds_per_candidate": round(sum(run["wall_s"] for run in runs) / len(rows), 4),
            "median_phases_s": {k: round(statistics.median(r["phases"].get(k, 0.0) for r in rows), 4) for k in phases},
            "mean_phases_s": {k: round(statistics.fmean(r["phases"].get(k, 0.0) for r in rows), 4) for k in phases},
            "baseline_remeasured": sum(r["remeasured"] for r in rows),
            "median_timing_samples": statistics.median(r["timing_samples"] or 0 for r in rows),
            "from": runs[0]["kernelcraft"],
            "per_turn_seconds_per_candidate": [round(run["wall_s"] / len(run["rows"]), 4) for run in runs]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problem")
    ap.add_argument("--tree", action="append", required=True, metavar="NAME=SRC",
                    help="a name and the src directory of a code tree (give two or more)")
    ap.add_argument("--candidates", type=int, default=16, help="per tree and turn, after 2 warm-up candidates")
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--timing-budget", type=float, default=2.0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree)
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    import torch

    record = {}
    for turn in range(args.turns):
        for name, src in trees.items():
            run = run_tree(src, args.problem, args.candidates, args.timing_budget)
            runs[name].append(run)
            print(f"turn {turn}, {name}: {run['wall_s'] / len(run['rows']):.3f} s a candidate", file=sys.stderr)
            # written after every tree's turn: a run cut short keeps what it measured
            record = {"what": "one GPU's verifier under several code trees, alternated", "problem": args.problem,
                      "device": run["device"], "torch": torch.__version__, "date": datetime.date.today().isoformat(),
                      "code": os.environ.get("KERNELCRAFT_CODE"), "trees": trees, "turns": args.turns,
                      "turns_done": turn + (name == list(trees)[-1]), "timing_budget_s": args.timing_budget,
                      "method": "wall clock of Verifier.evaluate_many after 2 warm-up candidates; Result.phases per "
                                "candidate",
                      "summary": {n: summary(r) for n, r in runs.items() if r}}
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(record, indent=1))
    print(json.dumps(record["summary"], indent=1))


if __name__ == "__main__":
    main()
