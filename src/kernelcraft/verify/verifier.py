"""The verifier's front door: evaluate one candidate or a batch, over every device given.

Builds that take seconds go to the CPU build pool as soon as a job arrives; one supervisor per
device takes the next job in order. `evaluate_many` returns results in the order of the jobs.

The caches a verdict rests on (baselines, build outcomes) are authenticated and hidden from candidates
(verify/trust.py). The harness's own files are checked after each evaluation and build (verify/integrity.py):
once they changed, the evaluation in progress and every later one is a `verifier_error` (`harness_tampered`).
"""

from __future__ import annotations

import queue
import re
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Callable

import torch

from kernelcraft.backends import get_backend
from kernelcraft.candidate import Candidate
from kernelcraft.problems import Problem
from kernelcraft.result import Result
from kernelcraft.verify.baselines import BaselineStore
from kernelcraft.verify.build import BuildPool
from kernelcraft.verify.config import VerifyConfig
from kernelcraft.verify.front import Job, JobFront
from kernelcraft.verify.guards import static_findings
from kernelcraft.verify.integrity import HarnessTampered, Integrity
from kernelcraft.verify.memory import MemoryNeed
from kernelcraft.verify.supervisor import Supervisor
from kernelcraft.target import Target
from kernelcraft.verify.trust import for_verifier, trusted_dir


def resolve_devices(device: str = "auto") -> list[str]:
    """`auto`: every visible GPU, else the CPU. `cuda`: every GPU. `cuda:N` or `cpu`: that one."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return ["cpu"]
    if not re.fullmatch(r"cuda(:\d+)?", device):
        raise ValueError(f"--device {device}: not a device kernelcraft runs on (auto, cpu, cuda or cuda:N)")
    if not torch.cuda.is_available():
        raise ValueError(f"--device {device}: no CUDA GPU is visible here (use --device cpu)")
    if device == "cuda":
        return [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    index = torch.device(device).index or 0
    if index >= torch.cuda.device_count():
        raise ValueError(f"--device {device}: only {torch.cuda.device_count()} GPU(s) visible")
    return [f"cuda:{index}"]


def least_busy(devices: int, judging, targets: list[int]) -> int:
    """The device to measure a target on: the fewest targets in flight plus one for a candidate being judged
    (`judging` holds the indices of those judging), the first of equals."""
    return min(range(devices), key=lambda i: (targets[i] + (i in judging), i))


STOP_WAIT_S = 10.0  # close(cancel=True): how long a device's driver is waited for once its workers are killed


class Verifier(JobFront):
    """Judges candidates on every device given. `submit` returns at once (a future); jobs are taken
    in submission order by one driver thread per device, while builds run ahead in the CPU pool."""

    def __init__(self, device: str = "auto", config: VerifyConfig | None = None, build_workers: int | None = None,
                 on_event: Callable[[str, dict], None] | None = None):
        """`on_event(kind, info)` hears what a caller may show as progress (`lock_wait`: an evaluation
        waits for another process's timing on its device)."""
        self.config = config or VerifyConfig()
        self.devices = resolve_devices(device)
        cache = Path(self.config.cache_dir)
        self.integrity = Integrity.of_harness() if self.config.harness_check else Integrity()
        self.trust = for_verifier(cache, self.config.sandbox)
        self.baselines = BaselineStore(trusted_dir(cache) / "baselines.json", self.trust)
        self.builds = BuildPool(cache, build_workers, trust=self.trust, sandbox=self.config.sandbox,
                                limits=self.config.limits, integrity=self.integrity)
        self.supervisors = [Supervisor(d, self.config, self.baselines, on_event) for d in self.devices]
        self._on_event = on_event or (lambda kind, info: None)
        self._todo: queue.Queue = queue.Queue()
        self._drivers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._busy_s = [0.0] * len(self.devices)  # seconds each device spent judging
        self._judged = [0] * len(self.devices)
        self._busy_since: dict[int, float] = {}  # driver index -> start of the job it is judging
        self._targets = [0] * len(self.devices)  # targets being measured on each device
        self._started = time.monotonic()
        self._profiler = None

    def close(self, cancel: bool = False) -> None:
        if cancel:  # Ctrl-C: the jobs queued withdrawn, the ones being judged stopped (their workers killed)
            self.builds.abort()
            while True:
                try:
                    item = self._todo.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[2].cancel()
            for sup in self.supervisors:
                sup.abort()
        for _ in self._drivers:
            self._todo.put(None)
        for t in self._drivers:
            t.join(STOP_WAIT_S if cancel else None)
        self._drivers = []
        for sup in self.supervisors:
            sup.close()
        self.builds.close()

    def _refused(self, problem: Problem, candidate: Candidate) -> bool:
        return self.config.static_guards and bool(static_findings(candidate.source, trusted=problem.source))

    def admit(self, problem: Problem) -> MemoryNeed:
        """Check a problem before any candidate of it: its memory need on the smallest device here, or
        ProblemTooLarge with a one-line reason (a problem-level error, reported once)."""
        needs = [sup.admit(problem) for sup in self.supervisors]
        return max(needs, key=lambda n: n.total)

    def target(self, problem: Problem) -> Target:
        """The sizes timed, the baselines and the roofline floor of `problem` (measured now unless cached; they are
        the baselines its candidates are compared with), on the least busy device: one judging no candidate and
        measuring no other target where there is one (a bench's runs, started together, ask at once; a supervisor
        measures after the candidate it is judging, so on one device they would wait for each other and for its
        queue). Raises ProblemTooLarge, or HarnessTampered once the harness's files have changed."""
        if self.integrity.check():
            raise HarnessTampered(self.integrity.message())
        with self._lock:
            index = least_busy(len(self.supervisors), self._busy_since, self._targets)
            self._targets[index] += 1
        try:
            return self.supervisors[index].target(problem)
        finally:
            with self._lock:
                self._targets[index] -= 1

    def submit(self, job: Job) -> Future:
        """Queue one job; its build (if its backend has one) starts now. The future holds its Result."""
        arch = self.supervisors[0].arch_list
        backend = get_backend(job.candidate.backend)
        # A build runs the candidate's module: only for candidates the static guards let through, and
        # only where some device here can run them (a CUDA build on a CPU-only verifier took 73 s to be
        # rejected backend_needs_cuda; the supervisor says so at once without it).
        runnable = any(backend.unavailable(s.device.type) is None for s in self.supervisors)
        build = (self.builds.submit(job.candidate, arch)
                 if backend.prebuild and runnable and not self._refused(job.problem, job.candidate) else None)
        future: Future = Future()
        with self._lock:
            if not self._drivers:
                self._drivers = [threading.Thread(target=self._drive, args=(i, s), daemon=True,
                                                  name=f"verifier-{s.device}")
                                 for i, s in enumerate(self.supervisors)]
                for t in self._drivers:
                    t.start()
        self._todo.put((job, build, future))
        return future

    def profile(self, problem: Problem, candidate: Candidate | None):
        """Nsight Compute's counters for one call of `candidate` (None: the reference) on the first device, at the
        sizes and under the fp32 policy it is judged with (verify/profile). Raises ProfileError: no ncu, no GPU,
        counters not permitted, a timeout, a candidate that fails under ncu."""
        from kernelcraft.verify.profile import Profiler

        sup = self.supervisors[0]
        if self._profiler is None:
            self._profiler = Profiler(str(sup.device), self.config.cache_dir, device_lock=self.config.device_lock)
        with sup.lock:  # never beside an evaluation of this process on the device
            sizes = sup.plan(problem).sizes.constants
            try:
                return self._profiler.run(problem, candidate, sizes, exact_fp32=not sup.policy.allow_tf32)
            finally:
                if candidate is not None:  # it ran outside the namespaces (profile/runner.py): it could read the key
                    self.trust.rotate()
                    self.integrity.check()

    def busy_seconds(self) -> float:
        """Device-seconds spent judging so far (jobs in progress counted up to now)."""
        now = time.monotonic()
        with self._lock:
            return sum(self._busy_s) + sum(now - t for t in self._busy_since.values())

    def usage(self) -> list[dict]:
        """Per device: its name, candidates judged, busy seconds and utilisation since the verifier started."""
        now = time.monotonic()
        wall = now - self._started
        with self._lock:
            busy = [b + (now - self._busy_since[i] if i in self._busy_since else 0.0) for i, b in enumerate(self._busy_s)]
            return [{"device": d, "name": s.device_name, "node": "", "host": None, "judged": self._judged[i],
                     "busy_s": round(busy[i], 3), "utilisation": round(busy[i] / wall, 4) if wall > 0 else None,
                     "lost": None} for i, (d, s) in enumerate(zip(self.devices, self.supervisors))]

    def device_names(self) -> list[str]:
        return [s.device_name for s in self.supervisors]

    def load(self) -> dict:
        """Devices busy and idle, and jobs waiting for one (for progress)."""
        with self._lock:
            busy = len(self._busy_since)
        return {"busy": busy, "idle": len(self.devices) - busy, "queued": self._todo.qsize(), "lost": 0,
                "starting": 0}

    def _drive(self, index: int, sup: Supervisor) -> None:
        while True:
            item = self._todo.get()
            if item is None:
                return
            job, build, future = item
            if not future.set_running_or_notify_cancel():
                continue
            with self._lock:
                self._busy_since[index] = time.monotonic()
            self._on_event("devices", self.load())
            try:
                result = None  # none once the harness has changed: refused below
                if not self.integrity.tampered:
                    waited = time.perf_counter()
                    outcome = build.result() if build is not None else None
                    waited = time.perf_counter() - waited
                    if not self.integrity.tampered:  # a build checks it too
                        result = sup.evaluate(job.problem, job.candidate, outcome, ahead=self._todo.qsize(),
                                              build_wait=waited)
                        self._containment_notes(result, outcome)
            except Exception as exc:  # noqa: BLE001 - a verifier fault must not lose the job
                result = Result(job.problem.name, job.candidate.name, job.candidate.backend,
                                device=sup.device_name, policy=self.config.policy).fail(
                    "verifier_error", "verifier_fault", f"{type(exc).__name__}: {exc}")
            finally:
                with self._lock:
                    self._busy_s[index] += time.monotonic() - self._busy_since.pop(index)
                    self._judged[index] += 1
            if self.integrity.check() or result is None:  # this evaluation too: it may have changed meanwhile
                result = Result(job.problem.name, job.candidate.name, job.candidate.backend, device=sup.device_name,
                                policy=self.config.policy).fail("verifier_error", "harness_tampered",
                                                                self.integrity.message())
            future.set_result(result)
            self._on_event("devices", self.load())

    def _containment_notes(self, result: Result, outcome) -> None:
        """What the containment of this candidate's build, and of the trusted caches, could not do here."""
        notes = [*(outcome.notes if outcome is not None else []), *([self.trust.note] if self.trust.note else [])]
        if notes:
            kept = result.containment.setdefault("notes", [])
            kept.extend(n for n in notes if n not in kept)
