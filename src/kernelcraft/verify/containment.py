"""Containment of a worker: what the OS lets us take away from candidate code, found at run time.

- Resource limits (setrlimit): no core files, a cap on the size of any file it writes, on open
  files and on CPU seconds.
- Namespaces (`unshare`, when this machine allows it): no network, and the harness (kernelcraft's
  own files) and the user's working directory mounted read-only, the caches it needs left writable.
- A watch from outside, at every poll of the channel: the worker's process tree (the kernel's children
  lists, else psutil), its memory and its private directory's size; past a limit the whole group is
  killed and the reason named.
Where a layer is unavailable the verifier says so (`Containment.notes`), it never pretends.
"""

from __future__ import annotations

import functools
import os
import resource
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import psutil


@dataclass
class Limits:
    max_file_bytes: int = 8 << 30  # any one file the worker writes
    max_open_files: int = 16384
    max_cpu_seconds: int = 3600
    max_processes: int = 64  # in the worker's tree, threads of one process not counted
    max_host_memory: int = 0  # bytes of RSS over the tree; 0: half of this machine's RAM
    max_disk_bytes: int = 8 << 30  # in the worker's private directory

    def host_memory(self) -> int:
        return self.max_host_memory or psutil.virtual_memory().total // 2


@dataclass
class Containment:
    prefix: list[str] = field(default_factory=list)  # command put before the worker's
    network_off: bool = False
    harness_read_only: bool = False
    notes: list[str] = field(default_factory=list)


def preexec(limits: Limits):
    """A preexec_fn for Popen: the resource limits, set in the child before it runs anything."""

    def apply() -> None:
        for which, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, limits.max_file_bytes),
                             (resource.RLIMIT_NOFILE, limits.max_open_files),
                             (resource.RLIMIT_CPU, limits.max_cpu_seconds)):
            soft, hard = resource.getrlimit(which)
            cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
            try:
                resource.setrlimit(which, (cap, hard))
            except (ValueError, OSError):
                pass

    return apply


@functools.lru_cache(maxsize=None)
def _unshare_flags() -> tuple[str, ...] | None:
    """The unshare flags that work here for a network and mount namespace, or None."""
    unshare = shutil.which("unshare")
    if unshare is None or os.environ.get("KERNELCRAFT_NO_SANDBOX"):
        return None
    tries = [("--net", "--mount")] if os.geteuid() == 0 else []
    tries.append(("--user", "--map-root-user", "--net", "--mount"))
    for flags in tries:
        try:
            probe = subprocess.run([unshare, *flags, "true"], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return (unshare, *flags)
    return None


def containment(read_only: list[Path], writable: list[Path]) -> Containment:
    """How to start a worker here: the namespace prefix if any, and what it achieves."""
    flags = _unshare_flags()
    result = Containment()
    if flags is None:
        result.notes.append("no network or mount namespace here (unshare unavailable or refused): "
                            "the worker has the network and can write the harness's files")
        return result
    script = ["set -e"]
    for path in dict.fromkeys(p.resolve() for p in read_only if p.exists()):
        q = shlex.quote(str(path))
        script += [f"mount --bind {q} {q}", f"mount -o remount,bind,ro {q}"]
    for path in dict.fromkeys(p.resolve() for p in writable if p.exists()):
        q = shlex.quote(str(path))
        script.append(f"mount --bind {q} {q}")  # writable again where a read-only parent covers it
    script.append('exec "$@"')
    result.prefix = [*flags, "sh", "-c", "; ".join(script), "kernelcraft-worker"]
    result.network_off = result.harness_read_only = True
    return result


@functools.lru_cache(maxsize=None)
def kernel_children_lists() -> bool:
    """Whether this kernel lists each task's children (/proc/PID/task/TID/children)."""
    return Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists()


def descendants(pid: int) -> list[int]:
    """The pids below `pid` in its process tree.

    From the kernel's children lists where it has them: they cost reads of the tree's own few files, where
    psutil reads every process's stat file on the host (10 times a candidate, 86 ms a candidate on a 64-core
    host with Ray). A list can miss a child that is created or exits during its one read; the watch reads it
    again at every poll. Elsewhere, psutil."""
    if not kernel_children_lists():
        try:
            return [child.pid for child in psutil.Process(pid).children(recursive=True)]
        except psutil.Error:
            return []
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:  # gone
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", "rb") as listing:
                    children = [int(c) for c in listing.read().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def tree(pid: int) -> list[psutil.Process]:
    """The process `pid` and its descendants (those still there)."""
    procs = []
    for each in (pid, *descendants(pid)):
        try:
            procs.append(psutil.Process(each))
        except psutil.Error:
            continue
    return procs


def directory_bytes(path: Path, stop_at: int) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
            if total > stop_at:
                return total
    return total


def breach(pid: int, private_dir: Path, limits: Limits) -> tuple[str, str] | None:
    """(reason, detail) if the worker's tree is over a limit right now, else None."""
    procs = tree(pid)
    if len(procs) > limits.max_processes:
        return "process_limit", f"the worker's tree holds {len(procs)} processes (limit {limits.max_processes})"
    rss = 0
    for proc in procs:
        try:
            rss += proc.memory_info().rss
        except psutil.Error:
            continue
    if rss > limits.host_memory():
        return "host_memory_limit", f"the worker's tree uses {rss >> 20} MiB of host memory (limit {limits.host_memory() >> 20} MiB)"
    used = directory_bytes(private_dir, limits.max_disk_bytes)
    if used > limits.max_disk_bytes:
        return "disk_limit", f"the worker wrote over {limits.max_disk_bytes >> 20} MiB to its directory"
    return None
