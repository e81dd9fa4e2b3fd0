"""What the timed-call checks cost: the verifier's timing loop with and without the in-place input changes
and the sampled outputs, per timed call, and the supervisor's check of the samples afterwards (a draw, the
changes replayed, the reference, the comparison), against the timing it follows.

    python benchmarks/timed_checks_cost.py ../shared/kernelbench/level1 --only 19_ReLU,23_Softmax --calls 300 --out OUT.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

import torch

from kernelcraft.problems import load_problem_dir
from kernelcraft.verify.check import compare
from kernelcraft.verify.inputs import draw_inputs, mutate_inputs, mutation_kind
from kernelcraft.verify.policy import get_policy
from kernelcraft.verify.timing import TimingConfig, time_interleaved


def measure(problem, device: torch.device, calls: int) -> dict:
    module = problem.load()
    model = module.Model(*module.get_init_inputs()).to(device).eval()

    def call(*args):
        with torch.no_grad():
            return model(*args)

    fns = {"candidate": call, "eager": call}
    make = lambda r: draw_inputs(module, str(device), 1000 + r)  # noqa: E731
    l2 = torch.cuda.get_device_properties(device).L2_cache_size if device.type == "cuda" else 0
    # the same number of timed calls both ways (no early stop on the standard error), so walls compare
    config = TimingConfig(min_samples=calls, max_samples=calls, target_rse=0.0, budget_s=120.0)
    kind = mutation_kind(module)
    out = {"problem": problem.name}
    for label, kwargs in (("plain", {}), ("checked", {"mutate": lambda xs, s: mutate_inputs(xs, s, kind),
                                                         "sample": "candidate", "keep": 1})):
        start = time.perf_counter()
        run = time_interleaved(fns, make, device, config, l2, **kwargs)
        wall = time.perf_counter() - start
        calls = sum(t.samples for t in run.timings.values())
        out[label] = {"wall_s": round(wall, 3), "timed_calls": calls, "ms_per_call": round(wall * 1e3 / calls, 4),
                      "candidate_median_ms": round(run.timings["candidate"].median_ms, 5)}
        samples = run.samples
    policy = get_policy("strict")
    start = time.perf_counter()
    for sample in samples:  # what the supervisor does with each kept sample
        inputs = draw_inputs(module, str(device), 1000 + sample.round)
        for seed in sample.mutations:
            mutate_inputs(inputs, seed, kind)
        expected = call(*inputs)
        outputs = sample.outputs
        assert compare(outputs if isinstance(outputs, torch.Tensor) else outputs[0],
                       expected if isinstance(expected, torch.Tensor) else expected[0], policy).ok
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    out["check_s"] = round(time.perf_counter() - start, 3)
    plain, checked = out["plain"], out["checked"]
    out["loop_overhead"] = round(checked["ms_per_call"] / plain["ms_per_call"] - 1, 4)
    out["check_overhead"] = round(out["check_s"] / checked["wall_s"], 4)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", type=Path)
    ap.add_argument("--only", required=True, help="comma-separated name fragments")
    ap.add_argument("--calls", type=int, default=300, help="timed calls of the candidate, both ways")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    keep = args.only.split(",")
    rows = []
    for problem in load_problem_dir(args.suite):
        if any(k in problem.name for k in keep):
            rows.append(measure(problem, device, args.calls))
            print(json.dumps(rows[-1]), flush=True)
            torch.cuda.empty_cache() if device.type == "cuda" else None
    props = torch.cuda.get_device_properties(0) if device.type == "cuda" else None
    args.out.write_text(json.dumps({
        "device": props.name if props else "cpu", "torch": torch.__version__, "date": datetime.date.today().isoformat(),
        "method": "time_interleaved with and without the in-place changes and one kept sample, %d timed calls of "
                  "each callable both ways, eager as the candidate; then the supervisor's check of the samples"
                  % args.calls,
        "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
