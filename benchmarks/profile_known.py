"""The profiler on known kernels: what Nsight Compute's counters say of a streaming copy (expected:
memory-bound near DRAM peak), of a kernel with forced 32-way shared-memory bank conflicts and of its padded
twin (expected: conflicts, then none), and of the reference, all on level1/relu at its full size.

    python benchmarks/profile_known.py [--out FILE] [--device cuda:N]

Writes one JSON file (default: $OUT/profile_known.json, else ./profile_known.json): the device, torch and
ncu versions, the date, the metrics asked for, and per kernel its summary (figures and words) and the
wall time the profile took.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

import torch

from kernelcraft.candidate import Candidate
from kernelcraft.problems import load_problem
from kernelcraft.problems.sizes import resolve_sizes
from kernelcraft.verify.profile import Profiler, ProfileError
from kernelcraft.verify.profile.ncu import METRICS

KNOWN = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "profile"
# (candidate file or None for the reference, what its summary should say)
CASES = [("relu_stream.py", "memory_bound, DRAM >= 70% of peak"),
         ("relu_smem_conflict.py", "bank_conflicted, conflicts ~31/32 of shared wavefronts"),
         ("relu_smem_padded.py", "no bank conflicts"),
         (None, "the reference (torch.relu): memory_bound")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")) / "profile_known.json")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--problem", default="level1/relu")
    args = ap.parse_args()
    try:
        profiler = Profiler(args.device)
    except ProfileError as exc:
        print(f"profile_known: {exc}", file=sys.stderr)
        return 1
    problem = load_problem(args.problem)
    sizes = resolve_sizes(problem, "full", "cuda")
    rows = []
    for name, expected in CASES:
        candidate = Candidate.from_file(KNOWN / name) if name else None
        start = time.perf_counter()
        try:
            profile = profiler.run(problem, candidate, sizes.constants).to_dict()
            error = None
        except ProfileError as exc:
            profile, error = None, f"{exc.reason}: {exc}"
        rows.append({"candidate": name or "reference", "problem": problem.name, "expected": expected,
                     "seconds": round(time.perf_counter() - start, 2), "profile": profile, "error": error})
        print(f"== {rows[-1]['candidate']} ({rows[-1]['seconds']} s)\n{profile['summary'] if profile else error}",
              flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "device": torch.cuda.get_device_name(torch.device(args.device)), "torch": torch.__version__,
        "ncu": profiler.version, "date": datetime.date.today().isoformat(), "problem": problem.name,
        "sizes": sizes.to_dict(), "command": "ncu --clock-control none --profile-from-start off --csv --page raw "
                                             "--metrics METRICS python -m kernelcraft.verify.profile.target SPEC",
        "metrics": METRICS.split(","), "rows": rows}, indent=1))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0 if all(r["profile"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
