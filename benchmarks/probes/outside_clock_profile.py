"""Where the outside clock's time goes on a GPU: verify/outside.py's helpers and the Case's checks wrapped with
timers (each synchronizing the device before and after), three built-in candidates judged after one warm-up.
Result: benchmarks/results/outside-clock-cost-h200-2026-11-30.json.

    PYTHONPATH=src python benchmarks/probes/outside_clock_profile.py level1/softmax
"""

from __future__ import annotations

import collections
import functools
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

import torch  # noqa: E402

from benchmarks.scale import builtin_candidates  # noqa: E402
from kernelcraft.inputs import as_problem  # noqa: E402
from kernelcraft.verify import Job, TimingConfig, Verifier, VerifyConfig, judge, outside  # noqa: E402

spent: collections.Counter = collections.Counter()
count: collections.Counter = collections.Counter()


def timed(owner, name: str, label: str | None = None) -> None:
    """Replace `owner.name` with the same function timed into `spent` under `label`."""
    fn, label = getattr(owner, name), label or name

    @functools.wraps(fn)
    def wrap(*args, **kwargs):
        torch.cuda.synchronize()
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            torch.cuda.synchronize()
            spent[label] += time.perf_counter() - start
            count[label] += 1
    setattr(owner, name, wrap)


def main() -> None:
    for name in ("draw_inputs", "fingerprint", "_spin", "_copy_ms", "outside_clock", "_judge_call",
                 "sample_reference"):
        timed(outside, name)
    for name in ("reference_outputs", "judge", "exact_outputs", "rounding_noise", "release"):
        timed(judge.Case, name, "Case." + name)
    problem = as_problem(sys.argv[1])
    candidates = builtin_candidates(problem, "triton", "cuda", 4)
    config = VerifyConfig(size="auto", timing=TimingConfig(budget_s=2.0), cache_dir=Path(tempfile.mkdtemp()))
    with Verifier("cuda:0", config) as verifier:
        verifier.evaluate_many([Job(problem, candidates[0])])
        spent.clear()
        count.clear()
        results = verifier.evaluate_many([Job(problem, c) for c in candidates[1:]])
    for r in results:
        print(r.status, json.dumps(r.phases), json.dumps(r.outside_clock))
    for label, seconds in spent.most_common():
        print(f"{label:28s} {seconds:8.3f} s  {count[label]:6d} calls  {seconds / count[label] * 1e3:8.3f} ms each")


if __name__ == "__main__":
    main()
