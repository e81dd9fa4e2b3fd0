"""Many problems, one run each with the same strategy and proposer, then KernelBench's metrics."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from kernelcraft.metrics import bench_metrics
from kernelcraft.problems import Problem
from kernelcraft.propose.base import Proposer
from kernelcraft.search.run import REFUSED, RunOutcome, start_run
from kernelcraft.spec import RunConfig, RunSpec
from kernelcraft.store import Store, new_id
from kernelcraft.verify import JobFront

RUNS_PER_GPU = 3


def runs_at_once(devices: list[str], config: RunConfig) -> int:
    """How many of a bench's runs go at once by default: three per GPU, so that while a run waits (its round's
    last candidate judged, its next ideas proposed, its target measured) the others' candidates keep the GPU
    busy. Three against two: 16.7 against 13.7 candidates a minute on one H200, 54.9 against 43.8 on four
    (12 level-1 problems, 2026-11-26). One per device on the CPU, where a run's proposing would share the cores
    with another's timing, or where runs have a wall-clock budget (queued behind another run's candidates, a
    run would spend its own)."""
    on_cpu = any(d.split("@")[0].split(":")[0] == "cpu" for d in devices)
    per_device = 1 if on_cpu or config.budget.wall_s is not None else RUNS_PER_GPU
    return max(1, per_device * len(devices))


def run_bench(store: Store, suite: str, problems: list[Problem], proposer: Proposer, verifier: JobFront,
              spec: RunSpec, out_dir: Path | None = None, on_event: Callable[[str, dict], None] | None = None,
              at_once: int | None = None) -> dict:
    """Run every problem, each run with a copy of `spec`; returns the bench summary (per problem rows, the metrics, each device's use). `at_once`
    runs go together (None: `runs_at_once`), their candidates judged on every device (a GPU judges one at a time,
    so runs at once share devices, not timings); rows stay in the problems' order, so the table and fast_p are
    those of a bench that ran them one by one."""
    if at_once is not None and at_once < 1:
        raise ValueError(f"runs at once must be at least 1, got {at_once}")
    config = spec.run
    at_once = at_once or runs_at_once(verifier.devices, config)
    bench_id = new_id("bench-")
    # Problems the proposer cannot cover start no run; the bench keeps them (and why) so that its reports count
    # them as problems without a correct kernel, as KernelBench counts them.
    not_covered = {p.name: why for p in problems if (why := uncovered(proposer, p, config.backend))}
    # Problems the device cannot hold are said once each, as the problem's error, and start no run either.
    # Asked of every problem at once where there are several devices: each device loads the problem to answer.
    asked = [p for p in problems if p.name not in not_covered]
    with ThreadPoolExecutor(max(1, min(len(verifier.devices), len(asked), 8))) as pool:
        answers = list(pool.map(lambda p: _too_large(verifier, p), asked))
    too_large = {p.name: why for p, why in zip(asked, answers) if why}
    store.create_bench(bench_id, suite, spec, not_covered, too_large, at_once)
    rows: list[dict | None] = [None] * len(problems)
    refused: list[str] = []  # set by the first run whose endpoint refused: every later problem would meet it
    cancel = threading.Event()

    def one(i: int, problem: Problem) -> None:
        if on_event and not refused:
            on_event("problem", {"index": i, "total": len(problems), "problem": problem.name})
        skipped = [(status, why) for status, why in (("not_run", refused[0] if refused else None),
                                                      ("not_covered", not_covered.get(problem.name)),
                                                      ("too_large", too_large.get(problem.name))) if why]
        if skipped:
            rows[i] = {"problem": problem.name, "run_id": None, "status": skipped[0][0], "correct": False,
                       "speedup_eager": None, "speedup_compile": None, "runtime_ms": None, "candidates": 0,
                       "best_file": None, "reason": skipped[0][1]}
            return
        rows[i] = row(start_run(store, problem, proposer, verifier, spec.copy(), out_dir, bench_id, on_event,
                                cancel))
        if (rows[i]["stop_reason"] or "").startswith(REFUSED) and not refused:
            refused.append(f"the model endpoint refused the requests of {problem.name}'s run")

    spread = min(at_once, len(problems))
    if spread <= 1:
        for i, problem in enumerate(problems):
            one(i, problem)
    else:
        _spread(one, problems, spread, cancel)
    return {"bench_id": bench_id, "suite": suite, "rows": rows, "metrics": bench_metrics(rows),
            "devices": verifier.usage(), "runs_at_once": at_once}


def _spread(one: Callable[[int, Problem], None], problems: list[Problem], workers: int,
            cancel: threading.Event) -> None:
    """`one` over the problems, `workers` at a time, in order of start. Ctrl-C (in this, the main thread) stops
    every run as an interrupt would, lets what is in flight finish and be stored, then is raised again (so does
    a run's error)."""
    with ThreadPoolExecutor(workers, thread_name_prefix="bench") as pool:
        futures = [pool.submit(one, i, p) for i, p in enumerate(problems)]
        try:
            for f in futures:
                f.result()
        except BaseException:
            cancel.set()
            for f in futures:
                f.cancel()
            pool.shutdown(wait=True)
            raise


def uncovered(proposer: Proposer, problem: Problem, backend: str) -> str | None:
    """Why the proposer cannot write kernels for `problem` (proposers that know say so), else None."""
    try:
        proposer.coverage(problem, backend)
    except ValueError as exc:
        return str(exc)
    return None


def _too_large(verifier: JobFront, problem: Problem) -> str | None:
    """Why the device cannot hold an evaluation of `problem` (ProblemTooLarge), else None."""
    from kernelcraft.verify.memory import ProblemTooLarge

    try:
        verifier.admit(problem)
    except ProblemTooLarge as exc:
        return str(exc)
    return None


def row(o: RunOutcome) -> dict:
    r = o.best.result if o.best else None
    return {"problem": o.problem, "run_id": o.run_id, "status": o.status, "correct": bool(o.best),
            "speedup_eager": r.speedup_eager if r else None, "speedup_compile": r.speedup_compile if r else None,
            "runtime_ms": r.runtime_ms if r else None, "candidates": o.counters.candidates, "best_file": o.best_file,
            "stop_reason": o.stop_reason, "error": o.error}
