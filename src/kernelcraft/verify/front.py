"""The verifier's interface: what every verifier offers (this machine's, verify/verifier.py; a Ray cluster's,
cluster/pool.py) and all that search, apply, bench and the RL scorer may use of one. A caller types against
`JobFront` and calls its members; none probes a verifier for what it has.
"""

from __future__ import annotations

import abc
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from kernelcraft.candidate import Candidate
from kernelcraft.problems import Problem
from kernelcraft.result import Result

if TYPE_CHECKING:
    from kernelcraft.target import Target
    from kernelcraft.verify.config import VerifyConfig
    from kernelcraft.verify.memory import MemoryNeed


@dataclass
class Job:
    problem: Problem
    candidate: Candidate


class JobFront(abc.ABC):
    """Every verifier: `submit(job) -> Future[Result]` and what a caller needs around it."""

    config: VerifyConfig  # the settings it judges under
    devices: list[str]  # the devices judging now ("cuda:0", or a cluster's labels)

    @abc.abstractmethod
    def submit(self, job: Job) -> Future:
        """Queue one job; the future holds its Result."""

    @abc.abstractmethod
    def close(self, cancel: bool = False) -> None:
        """Stop judging and let go of the devices; `cancel` (Ctrl-C): at once, the evaluation in progress stopped and
        those queued withdrawn, not judged to their end."""

    @abc.abstractmethod
    def admit(self, problem: Problem) -> MemoryNeed:
        """The problem's memory need (the largest over the devices), or ProblemTooLarge with a one-line reason."""

    @abc.abstractmethod
    def target(self, problem: Problem) -> Target:
        """The sizes timed, the baselines and the roofline floor of `problem`, as its candidates are judged."""

    @abc.abstractmethod
    def profile(self, problem: Problem, candidate: Candidate | None):
        """Nsight Compute's counters for one call (verify/profile), or ProfileError where none can be had."""

    @abc.abstractmethod
    def busy_seconds(self) -> float:
        """Device-seconds spent judging so far."""

    @abc.abstractmethod
    def usage(self) -> list[dict]:
        """Per device: device, name, node, host, judged, busy_s, utilisation, lost."""

    @abc.abstractmethod
    def load(self) -> dict:
        """Devices busy and idle, jobs waiting for one (busy, idle, queued, lost, starting)."""

    @abc.abstractmethod
    def device_names(self) -> list[str]:
        """What a verdict's speed depends on besides the settings: the devices' names (an H100's verdict is no
        verdict on a CPU)."""

    def __enter__(self):
        return self

    def __exit__(self, kind, *exc) -> None:
        self.close(cancel=kind is not None and issubclass(kind, KeyboardInterrupt))

    def evaluate(self, problem: Problem, candidate: Candidate) -> Result:
        return self.submit(Job(problem, candidate)).result()

    def evaluate_many(self, jobs: Iterable[Job], on_result: Callable[[int, Result], None] | None = None) -> list[Result]:
        """Evaluate every job; `on_result(index, result)` is called as each finishes (for progress)."""
        futures = [self.submit(job) for job in jobs]
        if on_result:
            for i, fut in enumerate(futures):
                fut.add_done_callback(lambda f, i=i: on_result(i, f.result()))
        return [f.result() for f in futures]
