"""How fast a candidate is, and against what: its timing beside eager with the device held, the trusted
clock's cross-check, and baselines (eager, torch.compile) measured in a worker that loaded no candidate
code. A baseline the eager control disagrees with is measured again before any speedup is published.
"""

from __future__ import annotations

import contextlib

from kernelcraft.problems import Problem
from kernelcraft.result import Result
from kernelcraft.target import Target
from kernelcraft.verify import judge, outside, target
from kernelcraft.verify.inputs import fresh_seed
from kernelcraft.verify.phases import PhaseClock
from kernelcraft.verify.process import WorkerDied, WorkerTimeout


def time_candidate(sup, case: judge.Case, problem: Problem) -> None:
    """Time the candidate beside eager (the device held), check the clock, publish speedups against a
    baseline measured under the same conditions, then the roofline and the review. `sup`: the Supervisor."""
    result = case.result
    clock = PhaseClock(result.phases)
    key = target.baseline_key(sup, problem)
    cached = sup.baselines.get(key, result.notes)
    if cached is None or (sup.config.compile_baseline and cached[1] is None):
        with clock("time.baselines"):
            cached = fresh_baselines(sup, problem, key, result)
    else:
        result.baseline_cached = True
    result.eager, result.compiled = cached
    with clock("time.warm"), sup.device_phase(result, shared=True):
        warm = case.worker.ask({"op": "warm", "seed": fresh_seed(), "names": ["candidate", "eager"]},
                               sup.config.load_timeout)
    if "error" in warm:  # first calls (JIT compilation) happen here, outside the device's timing lock
        case._raised(warm)
        return
    with sup.device_phase(result):
        for retime in range(outside.OUTSIDE_RETIMES + 1):  # timed again where the clock saw every spin over its limit
            with clock("time.measure"):
                if judge.timing(case, fresh_seed()) is None:
                    return
            if not sup.config.clock_check:
                break
            with clock("time.clock"):
                checked = outside.outside_clock(case, last=retime == outside.OUTSIDE_RETIMES)
            if checked is not None:
                if not checked:
                    return
                break
    if result.eager and _drifted(sup, result):
        with clock("time.rebaseline"):
            _baseline_drift(sup, problem, key, result)
    ms = result.runtime_ms  # each time is a call's cost (Timing.cost_ms): the device's or the host's, the longer
    if result.eager:
        result.speedup_eager = round(result.eager_ms / ms, 4)
    if result.compiled:
        result.speedup_compile = round(result.compile_ms / ms, 4)
    _host_bound_notes(result)
    bound = target.floor(sup.spec, case.ref.cost, sup.policy.allow_tf32)
    if bound is not None:
        result.roofline_ms = round(bound.ms, 5)
        result.roofline_fraction = round(bound.ms / ms, 4)
    judge.review(case, sup.config.sanity_bound)


def _host_bound_notes(result: Result, margin: float = 0.1) -> None:
    """A note for each timing (candidate, eager, torch.compile) whose median is more than `margin` above the device's
    own time for the same calls (verify.timing: their work queued ahead of the device): it holds host time, and
    moves with the host's load. Where the time counted (`Timing.cost_ms`) is not the median, the note says which."""
    for label, t in (("the candidate", result.runtime), ("eager", result.eager), ("torch.compile", result.compiled)):
        if t is None or t.device_ms is None or t.median_ms <= (1 + margin) * t.device_ms:
            continue
        cost = t.cost_ms
        counted = "" if cost == t.median_ms else \
            f"; counted: {cost:.4g} ms, the {'host' if cost == t.host_ms else 'device'}'s"
        result.notes.append(f"host_bound: {label}'s {t.median_ms:.4g} ms holds host time: its calls took "
                            f"{t.host_ms:.3g} ms on the host (median), and {t.device_ms:.4g} ms on the device "
                            f"with their work queued ahead{counted}")


def _drifted(sup, result: Result) -> bool:
    return abs(result.eager_control.median_ms / result.eager.median_ms - 1) > sup.config.baseline_drift


def _baseline_drift(sup, problem: Problem, key: str, result: Result) -> None:
    """The eager reference timed beside the candidate disagrees with the baseline (a cached one measured
    under other load, or the device's conditions changed since). The control runs in the candidate's
    process, so it never replaces the baseline: the baseline is measured again now, and the speedup is
    published against what was measured."""
    control, stale = result.eager_control.median_ms, result.eager.median_ms
    fresh = fresh_baselines(sup, problem, key, result)
    if fresh[0] is None:
        result.eager = result.compiled = None  # no speedup is published from a baseline known to be stale
        return
    result.eager, result.compiled = fresh
    result.baseline_cached = False
    result.notes.append(f"baseline re-measured: eager beside the candidate took {control:.4g} ms, the baseline "
                        f"said {stale:.4g} ms, measured again {fresh[0].median_ms:.4g} ms")
    if _drifted(sup, result):
        result.notes.append(f"baseline_drift: eager beside the candidate still differs from a clean worker's "
                            f"({control:.4g} ms against {fresh[0].median_ms:.4g} ms): the candidate's process "
                            "runs PyTorch at another speed, or the device is shared")


def fresh_baselines(sup, problem: Problem, key: str, result: Result, unlocked=contextlib.nullcontext):
    try:
        fresh = measure_baselines(sup, problem, result, unlocked)
        sup.baselines.put(key, *fresh)
        return fresh
    except (RuntimeError, WorkerDied, WorkerTimeout) as exc:
        result.notes.append(f"no baseline: {exc}")
        return None, None


def measure_baselines(sup, problem: Problem, result: Result, unlocked=contextlib.nullcontext):
    """Eager (and torch.compile) timed in a worker that has loaded no candidate code. The worker's start, load
    and first calls (torch.compile's compilation, seconds of CPU) run inside `unlocked()`: the supervisor's
    lock released where the caller may (`Supervisor.target`), so its device judges candidates meanwhile."""
    worker = sup.workers.spawn()
    sup.workers.hold(worker)  # stopped with the rest on Ctrl-C
    request = sup._load_request(problem, None)
    names = ["eager", "compile"] if sup.config.compile_baseline else ["eager"]
    try:
        with unlocked():
            worker.ready()
            reply = worker.ask(request, sup.config.load_timeout)
            if "error" in reply:
                raise RuntimeError(f"the reference of {problem.name} failed to load: {reply['error']}")
            with sup.device_phase(result, shared=True):
                reply = worker.ask({"op": "warm", "seed": fresh_seed(), "names": names}, sup.config.baseline_timeout)
            if "error" in reply:
                raise RuntimeError(f"compiling the reference of {problem.name} failed: {reply['error']}")
        with sup.device_phase(result):
            reply = worker.ask({"op": "time", "seed": fresh_seed(), "names": names, "config": sup.config.timing,
                                "l2_bytes": sup.l2_bytes}, sup.config.baseline_timeout)
        if "error" in reply:
            raise RuntimeError(f"timing the reference of {problem.name} failed: {reply['error']}")
        return reply["timings"]["eager"], reply["timings"].get("compile")
    finally:
        sup.workers.let_go(worker)
        worker.kill()


def measure_target(sup, problem: Problem, unlocked=contextlib.nullcontext) -> Target:
    """The target of `problem` on a supervisor's device: cached baselines, or measured now (the caller
    holds the supervisor's lock; `unlocked` releases it for the baseline worker's start and compilation).
    Raises ProblemTooLarge where the device cannot hold the problem."""
    ref = sup.plan(problem)
    key = target.baseline_key(sup, problem)
    notes: list[str] = []
    cached = sup.baselines.get(key, notes)
    if cached is None or (sup.config.compile_baseline and cached[1] is None):
        scratch = Result(problem.name, "(baselines)", "torch", device=sup.device_name, policy=sup.policy.name)
        cached = fresh_baselines(sup, problem, key, scratch, unlocked)
        notes.extend(scratch.notes)
    inputs = [{"shape": list(s.shape), "dtype": str(s.dtype).removeprefix("torch.")} for s in ref.cost.inputs]
    return Target(problem.name, sup.device_name, ref.sizes.describe(), inputs, cached[0], cached[1],
                  target.floor(sup.spec, ref.cost, sup.policy.allow_tf32), notes)
