"""Where a verdict's time goes: per run of a store (an apply's region runs, a bench's problems), the candidates
judged, their median wall time and the median of each phase the verifier records (worker start, load, build wait,
lock wait, checks, attribution, timing, ...), from the results as stored. Reads the store only.

    PYTHONPATH=src python benchmarks/verdict_phases.py runs.db [--apply APPLY_ID] [--json OUT]
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from pathlib import Path

import torch

from kernelcraft.store import Store


def summary(store: Store, bench_id: str | None = None) -> list[dict]:
    rows = []
    for run in reversed(store.runs(limit=100000, bench_id=bench_id)):
        results = [r for r in store.results(run.id).values() if not r.duplicate]
        if not results:
            continue
        phases: dict[str, list[float]] = {}
        for r in results:
            for name, seconds in r.phases.items():
                phases.setdefault(name, []).append(seconds)
        rows.append({"run": run["id"], "problem": run["problem"], "judged": len(results),
                     "ok": sum(r.correct for r in results),
                     "median_wall_s": round(statistics.median(r.wall_seconds for r in results), 2),
                     "median_phase_s": {k: round(statistics.median(v), 2) for k, v in sorted(phases.items())},
                     "phase_verdicts": {k: len(v) for k, v in sorted(phases.items())}})  # how many had the phase
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--apply", default=None, help="only the region runs of this apply (or bench) id")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if not args.store.is_file():
        ap.error(f"no store at {args.store}")
    store = Store(args.store)
    try:
        rows = summary(store, args.apply)
    finally:
        store.close()
    for row in rows:
        phases = ", ".join(f"{k} {v:g}" + (f" ({row['phase_verdicts'][k]} had it)" if row["phase_verdicts"][k] <
                                              row["judged"] else "") for k, v in row["median_phase_s"].items())
        print(f"{row['problem'][:40]:<40} {row['judged']:>3} judged ({row['ok']} ok), median {row['median_wall_s']:g} s: "
              f"{phases}")
    if args.json:  # where the verdicts were judged: this machine, which judged them (the store holds no device)
        device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
        args.json.write_text(json.dumps({"what": "median verdict phases per region run", "device": device,
                                         "torch": torch.__version__, "date": datetime.date.today().isoformat(),
                                         "store": str(args.store), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
