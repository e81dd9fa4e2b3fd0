"""A verifier actor killed mid-run on a cluster: its candidates are judged by the others and nothing is lost.

    PYTHONPATH=src python benchmarks/cluster_faults.py level1/softmax --device cuda --actors 4 --candidates 16 \\
        --out f.json

The built-in engineer's kernels for the problem (as benchmarks/scale.py makes them) go to `--actors` actors; once
the first actor has a job in flight its process gets SIGKILL. The record: every candidate's status, which device
judged it, the actors lost and replaced, the jobs put back in the queue, and the wall time, with the device, date,
torch and Ray versions.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from scale import builtin_candidates, provenance  # noqa: E402

from kernelcraft.cluster import ClusterVerifier  # noqa: E402
from kernelcraft.inputs import as_problem  # noqa: E402
from kernelcraft.verify import Job, TimingConfig, VerifyConfig  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--actors", type=int, default=2)
    ap.add_argument("--candidates", type=int, default=16)
    ap.add_argument("--backend", default="triton")
    ap.add_argument("--cluster", default="local")
    ap.add_argument("--timing-budget", type=float, default=1.0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    problem = as_problem(args.problem)
    candidates = builtin_candidates(problem, args.backend, args.device, args.candidates)
    config = VerifyConfig(timing=TimingConfig(budget_s=args.timing_budget),
                          cache_dir=Path(tempfile.mkdtemp(prefix="kc-faults-")))
    events = []
    t0 = time.perf_counter()
    with ClusterVerifier(args.cluster, args.device, config, actors=args.actors,
                         on_event=lambda kind, data: events.append((kind, data))) as cluster:
        futures = [cluster.submit(Job(problem, c)) for c in candidates]
        victim = None
        while victim is None:
            with cluster._lock:
                victim = next((s for s in cluster._slots if s.alive and s.inflight), None)
            time.sleep(0.05)
        os.kill(victim.info["pid"], signal.SIGKILL)
        killed_at = time.perf_counter() - t0
        results = [f.result() for f in futures]
        usage = cluster.usage()
    record = {**provenance(args), "problem": problem.name, "actors": args.actors, "killed": victim.label,
              "killed_after_s": round(killed_at, 2), "wall_s": round(time.perf_counter() - t0, 2),
              "statuses": [str(r.status) for r in results], "judged_by": [r.node for r in results],
              "all_judged": all(r.status is not None and str(r.status) != "verifier_error" for r in results),
              "lost": [d for k, d in events if k == "actor_lost"], "devices": usage}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: record[k] for k in ("killed", "all_judged", "lost", "wall_s")}, indent=2))


if __name__ == "__main__":
    main()
