"""The program Nsight Compute runs: one call of a candidate (or of the reference), bracketed for ncu.

`python -m kernelcraft.verify.profile.target SPEC` in a private directory, SPEC a JSON file the profiler
wrote. The problem and the candidate are loaded by the verifier's worker code (the same build caches,
the same sizes, the same fp32 policy); inputs are drawn as for a check; the callable is warmed up (JIT
builds, autotuning, allocator) and then exactly one call runs between cudaProfilerStart and Stop, which
is all ncu profiles (`--profile-from-start off`). The outcome goes to `target.json` beside SPEC; this
process's stdout and stderr go to `target.log`, so nothing the candidate prints reaches ncu's CSV.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from kernelcraft import syntax

WARMUP_CALLS = 3


def main(spec_path: str) -> int:
    here = Path(spec_path).parent
    log = os.open(here / "target.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    spec = json.loads(Path(spec_path).read_text())
    outcome = here / "target.json"
    try:
        outcome.write_text(json.dumps(profile_one_call(spec)))
    except BaseException as exc:  # noqa: BLE001 - the profiler reads this file, never our traceback
        outcome.write_text(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:2000]}))
    sys.stdout.flush()
    os._exit(0)  # a candidate's atexit hooks and threads are not ours to wait on


def profile_one_call(spec: dict) -> dict:
    import torch

    from kernelcraft.verify.inputs import draw_inputs
    from kernelcraft.verify.worker import Worker

    worker = Worker(None)
    sizes = {name: syntax.literal_eval(text) for name, text in spec["sizes"].items()}
    try:
        reply = worker.do_load(spec["problem_source"], spec.get("candidate_source"), "cuda:0", spec["init_seed"],
                               sizes, spec["build_cache"], spec["arch_list"], exact_fp32=spec["exact_fp32"])
    except Exception as exc:  # noqa: BLE001 - the candidate's (or the problem's) fault, reported as the worker would
        reply = worker._fault(exc)
    if "error" in reply:
        return {"error": reply["error"], "traceback": reply.get("traceback", "")}
    name = "candidate" if spec.get("candidate_source") is not None else "eager"
    fn = worker._timed_fns([name])[name]
    try:
        inputs = draw_inputs(worker.problem, "cuda:0", spec["input_seed"])
        for _ in range(WARMUP_CALLS):
            fn(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        fn(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    except Exception as exc:  # noqa: BLE001
        reply = worker._fault(exc)
        return {"error": reply["error"], "traceback": reply.get("traceback", "")}
    return {"ok": True, "warmup_calls": WARMUP_CALLS}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
