"""The verifier of a cluster: the local verifier's interface (`submit`, `admit`, `target`, `busy_seconds`, …) over
one verifier actor per device, so a search, a bench or an apply runs on it unchanged.

The driver (this process) keeps the queue. Jobs go out in submission order, at most `depth` in flight per actor (one
judged, the next ones building on the node's CPUs and their workers starting meanwhile), so no device waits on
another. A job goes to an actor that knows its problem already where one has room, else to the least loaded (`pick`):
an actor's first candidate of a problem loads the problem's reference and its baselines, measured there (seconds of
GPU time) unless the actor's host has them cached for that GPU model, so a bench spread problem by problem over
every actor pays that on each of them. An actor lost mid-job (its process killed, its node stopped) has its jobs
put back at the head of the queue for the others, and a replacement is asked of Ray; nothing judged is lost. A job
lost `MAX_LOSSES` times is failed as the verifier's fault rather than sent on to take down more actors.
"""

from __future__ import annotations

import collections
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable

from kernelcraft.cluster.actor import ProblemSpec, VerifierActor
from kernelcraft.cluster.connect import ClusterError, connect, hold, plan, ray_module, release
from kernelcraft.result import Result
from kernelcraft.verify import Job
from kernelcraft.verify.config import VerifyConfig
from kernelcraft.verify.front import JobFront

# Jobs in flight per actor: one judged and, queued behind it on the actor, as many as its supervisor keeps standby
# workers for (VerifyConfig.standby_workers): a supervisor spawns standby workers only for jobs it sees queued, and
# a worker takes longer to start (torch, CUDA) than a job takes to judge. With fewer queued, jobs waited for their
# worker to start: one actor judged at 0.48x (two in flight), 0.88x (three) and 1.05x (four) the rate of the GPU's
# own verifier (H200, level1/softmax, benchmarks/scale.py; benchmarks/results/README.md, section 4).
EXTRA_DEPTH = 2
MAX_LOSSES = 2  # times a job may be lost with its actor before it is failed
START_TIMEOUT = 300.0  # seconds for an actor to come up (Ray places it, it imports torch, spawns a worker)


@dataclass
class _Sent:
    job: Job
    future: Future
    losses: int = 0


@dataclass
class Slot:
    """One verifier actor as the driver sees it: where it is, what it holds, how long it has been busy."""

    actor: object
    started: float
    info: dict = field(default_factory=dict)
    label: str = ""
    alive: bool = False  # up and taking jobs
    lost: str | None = None  # why it stopped taking jobs
    inflight: dict = field(default_factory=dict)  # ObjectRef -> _Sent
    busy_s: float = 0.0
    busy_since: float | None = None
    judged: int = 0
    calls: int = 0  # one-off calls in flight (a problem's target: its baselines measured or read)
    known: set = field(default_factory=set)  # problems (sha) sent to it: reference loaded, baselines had

    def load(self) -> int:
        return len(self.inflight) + self.calls

    def usage(self, now: float, wall: float) -> dict:
        busy = self.busy_s + (now - self.busy_since if self.busy_since is not None else 0.0)
        return {"device": self.label, "name": self.info.get("device"), "node": self.info.get("node", "")[:16],
                "host": self.info.get("host"), "judged": self.judged, "problems": len(self.known),
                "busy_s": round(busy, 3),
                "utilisation": round(busy / wall, 4) if wall > 0 else None, "lost": self.lost}


class ClusterVerifier(JobFront):
    def __init__(self, address: str, device: str = "auto", config: VerifyConfig | None = None,
                 actors: int | None = None, on_event: Callable[[str, dict], None] | None = None,
                 start_timeout: float = START_TIMEOUT):
        self.address = address
        self.config = config or VerifyConfig()
        self.on_event = on_event or (lambda kind, info: None)
        self.start_timeout = start_timeout
        connect(address)
        hold()
        self._ray = ray = ray_module()
        try:
            self.kind, count = plan(address, device, actors)
        except ClusterError:
            release()
            raise
        resources = {"num_gpus": 1, "num_cpus": 0} if self.kind == "cuda" else {"num_cpus": 1}
        # A GPU actor's torch threads: its node's cores shared among its GPUs (a CPU actor judges with one thread,
        # as a CPU worker does: VerifyConfig.cpu_threads)
        self._threads = _threads_per_gpu(ray) if self.kind == "cuda" else None
        self.depth = self.config.standby_workers + EXTRA_DEPTH
        self._remote = ray.remote(VerifierActor).options(max_concurrency=self.depth + 2, **resources)
        self._lock = threading.Lock()
        self._queue: collections.deque[_Sent] = collections.deque()
        self._slots: list[Slot] = []
        self._starting: dict = {}  # info ObjectRef -> Slot
        self._closed = False
        self._t0 = time.monotonic()
        for _ in range(count):
            self._start_slot()
        self._await_first(count)
        self._thread = threading.Thread(target=self._dispatch, daemon=True, name="cluster-dispatch")
        self._thread.start()

    # the Verifier's interface ------------------------------------------------------------------------
    @property
    def devices(self) -> list[str]:
        with self._lock:
            return [s.label for s in self._slots if s.alive]

    def submit(self, job: Job) -> Future:
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the cluster verifier is closed")
            self._queue.append(_Sent(job, future))
            self._assign()
        self.on_event("devices", self.load())
        return future

    def admit(self, problem):
        """The problem's memory need on every device of the cluster (the largest); ProblemTooLarge where one
        device cannot hold it."""
        spec = ProblemSpec.of(problem)
        needs = self._call_all(lambda a: a.admit.remote(spec))
        return max(needs, key=lambda n: n.total)

    def target(self, problem):
        """Sizes, baselines and roofline floor on an actor that knows the problem, else the least loaded (what a
        run shows its proposer); each result's own speedups are against its own device's baselines."""
        spec = ProblemSpec.of(problem)
        return self._call_one(lambda a: a.target.remote(spec), problem.sha)

    def profile(self, problem, candidate):
        from kernelcraft.verify.profile import ProfileError

        raise ProfileError("Nsight Compute profiles run on this machine's GPU, not on a cluster's")

    def busy_seconds(self) -> float:
        now = time.monotonic()
        with self._lock:
            return sum(s.busy_s + (now - s.busy_since if s.busy_since is not None else 0.0) for s in self._slots)

    def usage(self) -> list[dict]:
        """Per actor (live or lost): device, node, host, candidates judged, problems sent to it (each one's
        reference loaded and baselines had there), busy seconds and utilisation."""
        now = time.monotonic()
        with self._lock:
            return [s.usage(now, now - s.started) for s in self._slots if s.info]

    def device_names(self) -> list[str]:
        """The live actors' labels (device and node): a cluster's verdicts are kept apart per actor set."""
        return self.devices

    def load(self) -> dict:
        """Devices busy and idle, and jobs waiting for one (for progress)."""
        with self._lock:
            alive = [s for s in self._slots if s.alive]
            busy = sum(1 for s in alive if s.inflight)
            return {"busy": busy, "idle": len(alive) - busy, "queued": len(self._queue),
                    "lost": sum(1 for s in self._slots if s.lost), "starting": len(self._starting)}

    def close(self, cancel: bool = False) -> None:
        """Let the actors go (`cancel`, Ctrl-C: killed at once, their evaluations with them, not closed in turn)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            slots = list(self._slots) + list(self._starting.values())
        thread = getattr(self, "_thread", None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(10.0 if cancel else None)  # before Ray goes: a call into Ray after its shutdown ends the process
        for s in slots:
            if not cancel:
                try:
                    self._ray.get(s.actor.close.remote(), timeout=60)
                except Exception:  # noqa: BLE001 - a lost actor has nothing to close
                    pass
            self._ray.kill(s.actor)
        release()

    # actors ------------------------------------------------------------------------------------------
    def _start_slot(self) -> Slot:
        slot = Slot(self._remote.remote(self.kind, self.config, self._threads), time.monotonic())
        self._starting[slot.actor.info.remote()] = slot
        self._slots.append(slot)
        return slot

    def _await_first(self, count: int) -> None:
        """Wait until every actor asked for is up, or the start timeout; at least one must come up."""
        deadline = time.monotonic() + self.start_timeout
        while self._starting and time.monotonic() < deadline:
            ready, _ = self._ray.wait(list(self._starting), num_returns=1, timeout=1.0)
            for ref in ready:
                self._started(ref)
        if not any(s.alive for s in self._slots):
            errors = "; ".join(s.lost for s in self._slots if s.lost) or "none came up in time"
            self.close()
            raise ClusterError(f"--cluster {self.address}: no verifier actor started ({errors})")
        if self._starting:
            self.on_event("cluster", {"message": f"{len(self._starting)} of {count} verifier actors still starting"})

    def _started(self, ref) -> None:
        slot = self._starting.pop(ref)
        try:
            slot.info = self._ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - an actor that could not start is said, the others go on
            slot.lost = _one_line(exc)
            self.on_event("actor_lost", {"device": slot.label or "a starting actor", "error": slot.lost})
            return
        slot.started = time.monotonic()
        index = ",".join(slot.info["gpu_ids"]) if self.kind == "cuda" else str(self._slots.index(slot))
        slot.label = f"{self.kind}:{index}@{slot.info['host']}"
        slot.alive = True
        self.on_event("actor_up", {"device": slot.label, "name": slot.info["device"]})

    # dispatch ----------------------------------------------------------------------------------------
    def _assign(self) -> None:
        """Send queued jobs, in order, each to the actor `pick` chooses, while one has room (the lock held)."""
        while self._queue:
            slot = pick(self._slots, self._queue[0].job.problem.sha, self.depth)
            if slot is None:
                return
            sent = self._queue.popleft()
            if not _claim(sent.future):
                continue
            ref = slot.actor.evaluate.remote(ProblemSpec.of(sent.job.problem), sent.job.candidate)
            slot.known.add(sent.job.problem.sha)
            if not slot.inflight:
                slot.busy_since = time.monotonic()
            slot.inflight[ref] = sent

    def _dispatch(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                refs = [r for s in self._slots if s.alive for r in s.inflight] + list(self._starting)
            if not refs:
                time.sleep(0.05)
                continue
            ready, _ = self._ray.wait(refs, num_returns=len(refs), timeout=0.05)
            for ref in ready:
                with self._lock:
                    if ref in self._starting:
                        self._started(ref)
                    else:
                        self._finished(ref)
                    self._assign()
            if ready:  # for progress: devices busy and idle, jobs queued (the lock is not held while it is heard)
                self.on_event("devices", self.load())
            with self._lock:
                self._give_up_if_stranded()

    def _finished(self, ref) -> None:
        slot = next((s for s in self._slots if ref in s.inflight), None)
        if slot is None:  # its actor was lost and its jobs put back already
            return
        sent = slot.inflight.pop(ref)
        try:
            result = self._ray.get(ref)
        except self._ray.exceptions.RayActorError as exc:
            slot.inflight[ref] = sent
            self._lose(slot, exc)
            return
        except Exception as exc:  # noqa: BLE001 - the actor raised: a verifier fault, the job is not lost
            result = Result(sent.job.problem.name, sent.job.candidate.name, sent.job.candidate.backend,
                            device=slot.info.get("device", ""), policy=self.config.policy).fail(
                "verifier_error", "verifier_fault", _one_line(exc))
        result.node = slot.info.get("node", "")[:16]
        slot.judged += 1
        self._idle_check(slot)
        sent.future.set_result(result)

    def _lose(self, slot: Slot, exc: Exception) -> None:
        """The actor is gone: its jobs go back to the head of the queue (in their order), a replacement is asked."""
        slot.alive, slot.lost = False, _one_line(exc)
        requeued = []
        for sent in reversed(list(slot.inflight.values())):
            sent.losses += 1
            if sent.losses >= MAX_LOSSES:
                sent.future.set_result(Result(sent.job.problem.name, sent.job.candidate.name,
                                              sent.job.candidate.backend, policy=self.config.policy).fail(
                    "verifier_error", "verifier_lost",
                    f"the verifier actors judging it were lost {sent.losses} times; last: {slot.lost}"))
            else:
                self._queue.appendleft(sent)
                requeued.append(sent)
        slot.inflight.clear()
        self._idle_check(slot)
        self.on_event("actor_lost", {"device": slot.label, "error": slot.lost, "requeued": len(requeued)})
        if not self._closed:
            self._start_slot()

    def _idle_check(self, slot: Slot) -> None:
        if not slot.inflight and slot.busy_since is not None:
            slot.busy_s += time.monotonic() - slot.busy_since
            slot.busy_since = None

    def _give_up_if_stranded(self) -> None:
        """No actor up and none started within the timeout: the queued jobs cannot be judged; fail them."""
        if any(s.alive for s in self._slots) or not self._queue:
            return
        if self._starting and min(s.started for s in self._starting.values()) + self.start_timeout > time.monotonic():
            return
        while self._queue:
            sent = self._queue.popleft()
            if _claim(sent.future):
                sent.future.set_result(Result(sent.job.problem.name, sent.job.candidate.name,
                                              sent.job.candidate.backend, policy=self.config.policy).fail(
                    "verifier_error", "verifier_lost", "every verifier actor of the cluster was lost, and none "
                                                       f"started again within {self.start_timeout:.0f} s"))

    # one-off calls -----------------------------------------------------------------------------------
    def _call_all(self, call) -> list:
        """On every actor at once (each loads the problem: seconds where its module is large), then each answer."""
        with self._lock:
            actors = [s.actor for s in self._slots if s.alive]
        return [self._get(ref) for ref in [call(a) for a in actors]]

    def _call_one(self, call, key: str):
        """On an actor that knows problem `key` (it answers from what it measured), else on the least loaded,
        counting calls in flight (a bench's runs measure their targets at once: one on each actor, not all on
        the first); that actor then knows the problem and is sent its candidates."""
        with self._lock:
            slot = pick(self._slots, key, None)
            if slot is None:
                raise ClusterError("no verifier actor of the cluster is up")
            slot.calls += 1
            slot.known.add(key)
        try:
            return self._get(call(slot.actor))
        finally:
            with self._lock:
                slot.calls -= 1

    def _get(self, ref):
        """The call's value; an exception the actor raised is raised here as itself (ProblemTooLarge …)."""
        try:
            return self._ray.get(ref)
        except self._ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, Exception):
                raise cause from None
            raise


def pick(slots: list[Slot], key: str, depth: int | None) -> Slot | None:
    """The actor for work on problem `key`: among those up with room (fewer than `depth` jobs in flight; None: no
    bound, a target's call), one that knows the problem, the least loaded of them, unless another actor has nothing
    at all while the knowing one has `EXTRA_DEPTH` or more in flight or, for a job, is measuring a target (seconds
    of baselines, a torch.compile among them, that the job would wait behind): an idle device costs more than
    loading a problem. Else the least loaded. None where no actor has room."""
    free = [s for s in slots if s.alive and (depth is None or len(s.inflight) < depth)]
    if not free:
        return None
    least = min(free, key=Slot.load)
    knowing = [s for s in free if key in s.known]
    if knowing:
        best = min(knowing, key=Slot.load)
        idle_elsewhere = least is not best and least.load() == 0
        behind_a_target = depth is not None and best.calls > 0
        if not idle_elsewhere or (best.load() < EXTRA_DEPTH and not behind_a_target):
            return best
    return least


def _threads_per_gpu(ray) -> int:
    """Cores per GPU on the cluster's nodes with GPUs (the smallest such share), at least one."""
    shares = [int(n["Resources"].get("CPU", 1) // n["Resources"]["GPU"]) for n in ray.nodes()
              if n.get("Alive") and n["Resources"].get("GPU")]
    return max(1, min(shares, default=1))


def _claim(future: Future) -> bool:
    """Mark a job's future running (a job put back after a loss is running already); False if it was cancelled."""
    return future.running() or future.set_running_or_notify_cancel()


def _one_line(exc: Exception) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".strip()
