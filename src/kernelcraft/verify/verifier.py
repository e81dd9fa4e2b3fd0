"""The verifier's front door: evaluate one candidate or a batch, over every device given.

Builds that take seconds go to the CPU build pool as soon as a batch arrives; one supervisor per
device takes the next job whose build is done. Results come back in the order of the jobs.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import torch

from kernelcraft.backends import get_backend
from kernelcraft.candidate import Candidate
from kernelcraft.problems import Problem
from kernelcraft.verify.baselines import BaselineStore
from kernelcraft.verify.build import BuildPool
from kernelcraft.verify.guards import static_findings
from kernelcraft.verify.result import Result
from kernelcraft.verify.supervisor import Supervisor, VerifyConfig


def resolve_devices(device: str = "auto") -> list[str]:
    """`auto`: every visible GPU, else the CPU. `cuda`: every GPU. `cuda:N` or `cpu`: that one."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return ["cpu"]
    if not torch.cuda.is_available():
        raise ValueError(f"--device {device}: no CUDA GPU is visible here (use --device cpu)")
    if device == "cuda":
        return [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    index = torch.device(device).index or 0
    if index >= torch.cuda.device_count():
        raise ValueError(f"--device {device}: only {torch.cuda.device_count()} GPU(s) visible")
    return [f"cuda:{index}"]


@dataclass
class Job:
    problem: Problem
    candidate: Candidate


class Verifier:
    def __init__(self, device: str = "auto", config: VerifyConfig | None = None, build_workers: int | None = None):
        self.config = config or VerifyConfig()
        self.devices = resolve_devices(device)
        cache = Path(self.config.cache_dir)
        self.baselines = BaselineStore(cache / "baselines.json")
        self.builds = BuildPool(cache, build_workers)
        self.supervisors = [Supervisor(d, self.config, self.baselines) for d in self.devices]

    def __enter__(self) -> "Verifier":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for sup in self.supervisors:
            sup.close()
        self.builds.close()

    def _refused(self, candidate: Candidate) -> bool:
        return self.config.static_guards and bool(static_findings(candidate.source))

    def evaluate(self, problem: Problem, candidate: Candidate) -> Result:
        return self.evaluate_many([Job(problem, candidate)])[0]

    def evaluate_many(self, jobs: Iterable[Job], on_result: Callable[[int, Result], None] | None = None) -> list[Result]:
        """Evaluate every job; `on_result(index, result)` is called as each finishes (for progress)."""
        jobs = list(jobs)
        arch = self.supervisors[0].arch_list
        # A build runs the candidate's module: only for candidates the static guards let through.
        builds = [self.builds.submit(j.candidate, arch)
                  if get_backend(j.candidate.backend).prebuild and not self._refused(j.candidate) else None
                  for j in jobs]
        todo: queue.Queue = queue.Queue()
        for i in range(len(jobs)):
            todo.put(i)
        results: list[Result | None] = [None] * len(jobs)

        def drive(sup: Supervisor) -> None:
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    build = builds[i].result() if builds[i] is not None else None
                    results[i] = sup.evaluate(jobs[i].problem, jobs[i].candidate, build, ahead=todo.qsize())
                except Exception as exc:  # noqa: BLE001 - a verifier fault must not lose the batch
                    results[i] = Result(jobs[i].problem.name, jobs[i].candidate.name, jobs[i].candidate.backend,
                                        device=sup.device_name, policy=self.config.policy).fail(
                        "runtime_error", "verifier_error", f"{type(exc).__name__}: {exc}")
                if on_result:
                    on_result(i, results[i])

        threads = [threading.Thread(target=drive, args=(s,), daemon=True) for s in self.supervisors]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results
