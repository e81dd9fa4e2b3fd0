"""Containment of a worker: what the OS lets us take away from candidate code, found at run time.

- Resource limits (setrlimit): no core files, a cap on the size of any file it writes, on open
  files and on CPU seconds.
- Namespaces (`unshare`, when this machine allows it): no network, and the harness (kernelcraft's
  own files, the installed packages and the interpreter's) and the user's working directory mounted
  read-only, the caches it needs left writable, the trusted caches (verify/trust.py) covered by an empty
  read-only tmpfs. The mounts are made in order from the shallowest path (a deeper one overrides its
  parent's), then a second user and mount namespace is entered, so that the candidate, root in it, finds
  every one of them locked: it cannot unmount the tmpfs or remount anything writable (without that second
  namespace it could: measured). The fork server, whose children share its namespaces, also drops every
  capability and makes itself non-dumpable (`harden`): a candidate cannot mount over paths later workers
  see, nor read or write the memory of the server or of a sibling worker (a baseline worker).
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
import signal
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


@functools.lru_cache(maxsize=None)
def _locks_mounts() -> bool:
    """Whether a user and mount namespace can be entered inside the sandbox's (it locks the mounts made there)."""
    flags = _unshare_flags()
    if flags is None:
        return False
    try:
        probe = subprocess.run([*flags, flags[0], *_LOCK, "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


_LOCK = ("--user", "--map-root-user", "--mount")
# sh: bind a path onto itself with what is mounted below it, all of it read-only
_RO_TREE = ("read_only() { mount --rbind \"$1\" \"$1\"; mount -o remount,bind,ro \"$1\"; "
            "for m in $(awk -v p=\"$1/\" 'substr($5, 1, length(p)) == p {print $5}' /proc/self/mountinfo); do "
            "mount -o remount,bind,ro \"$m\" 2>/dev/null || true; done; }")


def can_hide() -> bool:
    """Whether candidates here run where a directory can be hidden from them for good (verify/trust.py)."""
    return _unshare_flags() is not None and _locks_mounts()


def containment(read_only: list[Path], writable: list[Path], hidden: list[Path] = ()) -> Containment:
    """How to start a sandboxed process here: the namespace prefix if any, and what it achieves. `read_only`,
    `writable` and `hidden` (an empty read-only tmpfs over it) are applied from the shallowest path down, so the
    deeper of two nested paths decides; for one path, hidden over writable over read-only."""
    flags = _unshare_flags()
    result = Containment()
    if flags is None:
        result.notes.append("no network or mount namespace here (unshare unavailable or refused): "
                            "the worker has the network and can write the harness's files")
        return result
    mounts: dict[Path, int] = {}
    for rank, paths in enumerate((read_only, writable, hidden)):
        for path in paths:
            if rank == 2:  # made now, so that a candidate cannot make it and plant a key there
                try:
                    Path(path).mkdir(parents=True, exist_ok=True, mode=0o700)
                except OSError:
                    pass  # where we cannot, neither can the candidate (the same user)
            if Path(path).exists():
                resolved = Path(path).resolve()
                mounts[resolved] = max(rank, mounts.get(resolved, 0))
    # Recursive binds: a plain bind would hide what is mounted below the path (a container runtime's driver files
    # under /usr, a data volume under the working directory); below a read-only path, those are made read-only too.
    script, made = ["set -e", _RO_TREE], {}
    for path, rank in sorted(mounts.items(), key=lambda item: (len(item[0].parts), item[1])):
        covering = max((p for p in made if p in path.parents), key=lambda p: len(p.parts), default=None)
        if covering is not None and (made[covering] == 2 or (rank < 2 and made[covering] == rank)):
            continue  # hidden with its parent, or as its parent's mount has it already
        made[path] = rank
        q = shlex.quote(str(path))
        if rank == 2:
            script.append(f"mount -t tmpfs -o ro,size=4k,mode=555 kernelcraft-hidden {q}")
        elif rank == 1:  # a bind copies its source's read-only flag: made writable again (unless the host's is ro)
            script += [f"mount --rbind {q} {q}", f"mount -o remount,bind,rw {q} 2>/dev/null || true"]
        else:
            script.append(f"read_only {q}")
    if _locks_mounts():
        script.append(f'exec {shlex.quote(flags[0])} {" ".join(_LOCK)} -- "$@"')
    else:
        script.append('exec "$@"')
        result.notes.append("no nested user namespace here: the candidate, root in its namespace, could undo the "
                            "read-only and hiding mounts")
    result.prefix = [*flags, "sh", "-c", "; ".join(script), "kernelcraft-worker"]
    result.network_off = result.harness_read_only = True
    return result


def installed_paths() -> list[Path]:
    """Where the interpreter and its packages live (the prefixes, the standard library, site-packages, the user's
    site-packages where Python reads it), and where torch and Triton are found: a candidate that wrote there
    would run inside every process started after it."""
    import importlib.util
    import site
    import sys
    import sysconfig

    paths = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
             *(sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")),
             *site.getsitepackages()]
    if site.ENABLE_USER_SITE:
        paths.append(site.getusersitepackages())
    for name in ("torch", "triton"):
        spec = importlib.util.find_spec(name)
        paths += list(spec.submodule_search_locations or []) if spec else []
    return [Path(p) for p in dict.fromkeys(p for p in paths if p)]


def harden() -> None:
    """Drop every capability (the bounding set too, so an exec gains none back) and make this process
    non-dumpable; run where candidates share a namespace with processes that outlive them (the fork server, whose
    children inherit it). Without a capability a candidate cannot mount over what later workers read, and
    nobody in the namespace can read or write the memory of a non-dumpable process (/proc/PID/mem, ptrace). A
    no-op where the calls are refused (not Linux)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        return
    pr_capbset_drop, pr_cap_ambient, pr_cap_ambient_clear_all, pr_set_dumpable = 24, 47, 4, 4
    for cap in range(last + 1):
        libc.prctl(pr_capbset_drop, cap, 0, 0, 0)
    libc.prctl(pr_cap_ambient, pr_cap_ambient_clear_all, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words
    libc.capset(ctypes.byref(header), data)
    libc.prctl(pr_set_dumpable, 0, 0, 0, 0)


def become_subreaper() -> bool:
    """Make this process the one that takes in every orphaned process below it (PR_SET_CHILD_SUBREAPER), rather than
    the host's init: a process a candidate started and orphaned, to leave its worker's tree, is then still found
    (as a child of this one). False where the call is refused (not Linux)."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


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


def children(pid: int) -> list[int]:
    """The pids whose parent is `pid` (its threads' children lists, else psutil), the dead (zombies) left out."""
    if kernel_children_lists():
        found = []
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return []
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as listing:
                    found += [int(c) for c in listing.read().split()]
            except OSError:
                continue
    else:
        try:
            found = [child.pid for child in psutil.Process(pid).children()]
        except psutil.Error:
            return []
    return [c for c in found if not _zombie(c)]


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True  # gone


def signal_tree(pid: int, sig: int) -> list[int]:
    """Send `sig` to the process group led by `pid` and to every process of its tree: a descendant that started a
    session of its own is in no group of ours, and is reached only so. Repeated until a pass finds no process it
    has not signalled (a stopped process forks no more; one forked during a pass is found by the next). The pids
    signalled, `pid` first."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    done: list[int] = []
    for _ in range(8):
        new = [p for p in (pid, *descendants(pid)) if p not in done]
        if not new:
            break
        for p in new:
            try:
                os.kill(p, sig)
            except (ProcessLookupError, PermissionError):
                pass
        done += new
    return done


def kill_tree(pid: int) -> list[int]:
    """Kill the process group led by `pid` and every process of its tree, each in a session of its own too: the tree
    is stopped first (a killed parent's children would leave it, taken in elsewhere), then killed. The pids killed."""
    stopped = signal_tree(pid, signal.SIGSTOP)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for p in stopped:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return stopped


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


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user and system) the process `pid` and its descendants have used so far."""
    total = 0.0
    for proc in tree(pid):
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def affinity_widened(pid: int, cores: set[int]) -> list[int]:
    """Threads of the worker's tree allowed to run on a core outside `cores` (which it was pinned to)."""
    widened = []
    for proc in tree(pid):
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task")]
        except OSError:
            continue
        for tid in tids:
            try:
                if not os.sched_getaffinity(tid) <= cores:
                    widened.append(tid)
            except OSError:
                continue
    return widened
