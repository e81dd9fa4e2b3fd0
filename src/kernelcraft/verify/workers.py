"""A supervisor's worker processes: one per candidate, forked from a fork server (or spawned), started ahead
of the candidate that takes them (standby), killed after it and reaped in the background.

The supervisor owns the judging; this owns the processes' life. Both are used under the supervisor's lock.
"""

from __future__ import annotations

import threading
from pathlib import Path

import torch

from kernelcraft.verify.forkserver import ForkServer, ForkServerError
from kernelcraft.verify.process import WorkerDied, WorkerProcess, sandbox_paths, worker_environment


def standby_to_start(device_type: str, ahead: int, taken: int, limit: int, have: int) -> int:
    """Standby workers to start after taking the `taken`-th worker with `ahead` jobs queued and `have` standby
    workers left. Wanted: one per queued job, at least one from the second candidate on, at most `limit`; none on
    the CPU (a start there shares the cores with the timing). They are started together, once none is left: a
    start (1.3 s on an H200 with its GPU busy) outlasts a candidate's load and check, and every timing waits for
    the starts in flight, so one start per candidate made every timing wait; a batch makes one timing wait."""
    if device_type == "cpu" or have:
        return 0
    return min(max(ahead, 1 if taken > 1 else 0), limit)


class Workers:
    def __init__(self, device: torch.device, config, env: dict[str, str]):
        self.device, self.config, self.env = device, config, env  # config: the supervisor's VerifyConfig
        self.standby: list[WorkerProcess] = []
        self.exiting: list[threading.Thread] = []  # reapers of killed workers, waited for before device work
        self.fork_server: ForkServer | None = None  # under worker_start="fork"
        self.fork_failure = ""  # why workers are spawned after all
        self.taken = 0  # workers taken for candidates
        self.active: set[WorkerProcess] = set()  # taken (or held) and not yet retired: the ones at work
        self._active_lock = threading.Lock()
        self.stopped = False  # abort(): no worker is started from here on

    def spawn(self) -> WorkerProcess:
        """A worker starting now (`ready()` waits for its start); WorkerDied once the verifier is stopping."""
        if self.stopped:
            raise WorkerDied("the verifier was stopped (Ctrl-C or SIGTERM): no worker is started", None)
        cuda_index = (self.device.index or 0) if self.device.type == "cuda" else None
        server = self._fork_server()
        if server is not None:
            try:
                return WorkerProcess(self.env, limits=self.config.limits, cuda_index=cuda_index, server=server)
            except ForkServerError as exc:  # the server is gone: spawned workers from here on, and why
                self.fork_failure = str(exc)
        return WorkerProcess(self.env, limits=self.config.limits, sandbox=self.config.sandbox,
                             cache_dir=Path(self.config.cache_dir), cuda_index=cuda_index)

    def _fork_server(self) -> ForkServer | None:
        """The fork server workers come from under worker_start="fork", started on first use; None (spawned
        workers) otherwise, or once it has failed (`fork_failure` says why)."""
        if self.config.worker_start != "fork" or self.fork_failure:
            return None
        if self.fork_server is None:
            env, _ = worker_environment(self.env)
            read_only, writable, hidden = sandbox_paths(cache_dir=Path(self.config.cache_dir))
            try:
                self.fork_server = ForkServer(env, read_only, writable, hidden, sandbox=self.config.sandbox)
            except ForkServerError as exc:
                self.fork_failure = str(exc)
                return None
        return self.fork_server

    def take(self, ahead: int) -> WorkerProcess:
        """A started worker for the next candidate, and standby workers started for those after it: one per job
        queued behind it, and from the second candidate on at least one (a search's next candidate comes when
        its round's are judged, or another run's, with no job queued as this one is taken: without a standby it
        would wait for a worker's start, 0.9 s a candidate in a bench of level-1 problems on an H200)."""
        worker = self.standby.pop(0) if self.standby else self.spawn()
        self.taken += 1
        with self._active_lock:
            self.active.add(worker)
        for _ in range(standby_to_start(self.device.type, ahead, self.taken, self.config.standby_workers,
                                        len(self.standby))):
            self.standby.append(self.spawn())  # they warm up while this one works
        return worker

    def standby_started(self) -> bool:
        """Wait for the standby workers' starts (CUDA initialised, the profiler warmed up); a worker that fails
        to start is dropped, as taking it would have. Whether any is left."""
        for worker in list(self.standby):
            try:
                worker.ready()
            except WorkerDied:
                self.standby.remove(worker)
        return bool(self.standby)

    def retire(self, worker: WorkerProcess) -> None:
        """Kill a worker and reap it in the background: its exit overlaps the next candidate's start."""
        with self._active_lock:
            self.active.discard(worker)
        worker.kill(wait=False)
        reaper = threading.Thread(target=worker.reap, name="worker-reaper", daemon=True)
        reaper.start()
        self.exiting.append(reaper)

    def settle(self) -> None:
        """Wait for killed workers to be gone (their device memory back) before the next work on the device."""
        while self.exiting:
            self.exiting.pop().join()

    def hold(self, worker: WorkerProcess) -> None:
        """Count a worker spawned for other work (a baseline's) as at work: abort() kills it too; the caller kills
        it when done (`let_go` first)."""
        with self._active_lock:
            self.active.add(worker)

    def let_go(self, worker: WorkerProcess) -> None:
        with self._active_lock:
            self.active.discard(worker)

    def abort(self) -> None:
        """Kill every worker now, those at work included (Ctrl-C): their evaluation's next word with them fails at
        once, rather than the call going on to its end; and start none after."""
        self.stopped = True
        with self._active_lock:
            doomed = [*self.active, *self.standby]
        for worker in doomed:
            worker.kill(wait=False)

    def close(self) -> None:
        self.settle()
        for worker in self.standby:
            worker.kill()
        self.standby = []
        if self.fork_server is not None:
            self.fork_server.close()
            self.fork_server = None
