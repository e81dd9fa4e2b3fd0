"""One timing phase at a time per device, across every process on the machine.

Several evaluations share a GPU (a user's script, two terminal runs, a coding agent, `bench` beside
`eval`): timed beside each other, honest kernels fail the trusted clock's cross-check and speedups
inflate. Every phase that runs work on the device takes a `flock` on a file named for the device (its
UUID on a GPU, so two processes that see the same card under different CUDA_VISIBLE_DEVICES share it):
timing phases (a candidate's timing and clock check, a baseline's timing) hold it exclusively;
correctness checks hold it shared, so they overlap each other but never a timing phase (kernels of
another process would be counted in the timed kernel's events). Compilation takes nothing. The lock is
released by the kernel when a holder dies, so a killed run never blocks the device. A wait can be bounded
(`until`): a run whose budget ends does not wait on another process past it (DeviceBusy).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import socket
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch


def lock_dir() -> Path:
    """Shared by every user of the machine (a sticky, world-writable directory, like /tmp itself)."""
    path = Path(os.environ.get("KERNELCRAFT_LOCK_DIR") or Path(tempfile.gettempdir()) / "kernelcraft-locks")
    if not path.exists():
        path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            path.chmod(0o1777)
    return path


def device_key(device: torch.device) -> str:
    """A name for the physical device: the GPU's UUID, or the host for the CPU."""
    if device.type == "cuda":
        uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
        return f"gpu-{uuid}" if uuid is not None else f"gpu-{socket.gethostname()}-{device.index or 0}"
    return f"cpu-{socket.gethostname()}"


class DeviceBusy(Exception):
    """The device was held by another process until the wait's bound (`DeviceLock.held(until=…)`)."""

    def __init__(self, waited: float, holder: str):
        super().__init__(f"the device was held by another kernelcraft process (pid {holder}) for the whole "
                         f"{waited:.1f} s its caller could wait")
        self.waited, self.holder = waited, holder


POLL_S = 0.05  # how often a bounded wait tries the lock again


class DeviceLock:
    def __init__(self, key: str, directory: Path | None = None):
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", key)
        self.path = (directory or lock_dir()) / f"{safe}.lock"

    @contextlib.contextmanager
    def held(self, shared: bool = False, on_wait: Callable[[str], None] | None = None, until: float | None = None):
        """Hold the device for the block (exclusively, or `shared` with other shared holders); yields the
        seconds spent waiting for it. `until` (a time.time()): not held by then, DeviceBusy is raised."""
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            start = time.perf_counter()
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait:
                    on_wait("waiting for the device: another evaluation is "
                            + (f"timing on it (pid {self.holder()})" if shared else "using it"))
                self._wait(fd, mode, until, start)
            waited = time.perf_counter() - start
            if not shared:
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
            try:
                yield waited
            finally:
                if not shared:
                    os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _wait(self, fd: int, mode: int, until: float | None, start: float) -> None:
        if until is None:
            fcntl.flock(fd, mode)
            return
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                left = until - time.time()
                if left <= 0:
                    raise DeviceBusy(time.perf_counter() - start, self.holder()) from None
                time.sleep(min(POLL_S, left))

    def holder(self) -> str:
        try:
            return self.path.read_text().strip() or "unknown"
        except OSError:
            return "unknown"
