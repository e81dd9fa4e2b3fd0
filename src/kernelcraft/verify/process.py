"""A worker subprocess and its private channel: spawn, ask with a deadline, kill its whole group.

The worker is started with `start_new_session=True` (its own process group, so a timeout kills
everything it started), a scrubbed environment, a private temporary directory as its cwd and TMPDIR,
and its stdout/stderr in a log file there, so nothing it prints can pass for a result. The channel is
a Unix socket with a random key that only the supervisor holds before the worker connects.
"""

from __future__ import annotations

import io
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Listener
from pathlib import Path

from kernelcraft.verify import ipc
from kernelcraft.verify.containment import (Containment, Limits, breach, containment, kill_tree, preexec,
                                            signal_tree)
from kernelcraft.verify.forkserver import ForkServer, close_channel

_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|SESSION|COOKIE|PRIVATE", re.I)
_KEEP = {"PATH", "HOME", "LANG", "LC_ALL", "TERM", "USER", "LOGNAME", "SHELL", "CUDA_HOME", "CUDA_PATH",
         "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "PYTHONPATH", "VIRTUAL_ENV",
         "TRITON_CACHE_DIR", "KERNELCRAFT_CACHE", "KERNELCRAFT_ARCH", "TORCH_EXTENSIONS_DIR",
         "TORCHINDUCTOR_CACHE_DIR", "CC", "CXX", "OMP_NUM_THREADS", "MAX_JOBS", "SYSTEMROOT"}


class WorkerDied(Exception):
    def __init__(self, message: str, exitcode: int | None):
        super().__init__(message)
        self.exitcode = exitcode


class WorkerTimeout(Exception):
    pass


class UnsafeReply(Exception):
    """The worker's reply named something outside what a reply may hold (e.g. a class of its own)."""


# Everything a reply may name when unpickled here: torch's tensor and storage rebuilders (CUDA IPC and
# shared memory), dtypes, sizes, devices, and our Timing record. A candidate's own class, or a callable
# that would run code in this trusted process, is refused.
_SAFE_GLOBALS = {
    "torch.multiprocessing.reductions": {"rebuild_cuda_tensor", "rebuild_tensor", "rebuild_storage_filename",
                                         "rebuild_storage_fd", "rebuild_typed_storage", "rebuild_typed_storage_child",
                                         "rebuild_storage_empty", "rebuild_event"},
    "torch._utils": {"_rebuild_tensor_v2", "_rebuild_tensor", "_rebuild_parameter"},
    "torch.storage": {"UntypedStorage", "TypedStorage", "_load_from_bytes"},
    "torch": {"Tensor", "Size", "device", "dtype", "UntypedStorage", "TypedStorage"} | {
        name for name in dir(__import__("torch")) if isinstance(getattr(__import__("torch"), name, None),
                                                                 __import__("torch").dtype)},
    "collections": {"OrderedDict"},
    "kernelcraft.result": {"Timing"},
}


class _ReplyUnpickler(ipc.Unpickler):
    def find_class(self, module: str, name: str):
        if name in _SAFE_GLOBALS.get(module, ()) or (module == "torch" and name.endswith("Storage")):
            return super().find_class(module, name)
        raise UnsafeReply(f"the reply names {module}.{name}, which a reply may not hold")


def safe_loads(data: bytes, cuda_index: int | None = None):
    """Unpickle a worker's reply, refusing any global outside _SAFE_GLOBALS; its CUDA tensors opened on this
    process's `cuda_index` for the worker's GPU (verify/ipc.py)."""
    return _ReplyUnpickler(io.BytesIO(data), cuda_index).load()


class WorkerLimit(Exception):
    """The worker went over a containment limit (processes, host memory, disk) and was killed; `status`: the verdict
    it makes (a process that left the worker's tree is a candidate's doing, `rejected`)."""

    def __init__(self, reason: str, detail: str, status: str = "runtime_error"):
        super().__init__(detail)
        self.reason, self.status = reason, status


def worker_environment(extra: dict[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """The environment a worker gets, and the names of the variables withheld from it."""
    env, stripped = {}, []
    for name, value in os.environ.items():
        if _SECRET.search(name) and name not in _KEEP:
            stripped.append(name)
        elif name in _KEEP or name.startswith(("LC_", "TORCH_", "TRITON_", "CUDA_", "NCCL_", "NVSHMEM_")):
            env[name] = value
    env.update(extra or {})
    # The worker imports kernelcraft from wherever this process did.
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env, sorted(stripped)


class WorkerProcess:
    """One spawned worker; `start` returns at once, `ready` waits for its handshake."""

    def __init__(self, extra_env: dict[str, str] | None = None, start_timeout: float = 120.0,
                 limits: Limits | None = None, writable: list[Path] = (), sandbox: bool = True,
                 cuda_index: int | None = None, server: ForkServer | None = None, cache_dir: Path | None = None):
        """`cuda_index`: this process's ordinal of the one GPU the worker sees (its cuda:0), for the CUDA tensors
        the worker hands back (verify/ipc.py). `server`: fork the worker from this fork server (its imports done;
        its namespaces are the server's) instead of spawning a new interpreter. `cache_dir`: the verifier's cache
        (its inline builds read-only, its trusted part hidden: sandbox_paths)."""
        self.limits = limits or Limits()
        self.cuda_index = cuda_index
        self.dir = Path(tempfile.mkdtemp(prefix="kernelcraft-worker-"))
        self.key = secrets.token_bytes(32)
        address = str(self.dir / "channel.sock")
        self.listener = Listener(address, family="AF_UNIX", authkey=self.key)
        env, self.stripped = worker_environment({**(extra_env or {}), "TMPDIR": str(self.dir),
                                                 "KERNELCRAFT_SUPERVISOR_PID": str(os.getpid()),
                                                 "KERNELCRAFT_SPAWNED_AT": f"{time.time():.6f}"})
        self.log_path = self.dir / "worker.log"
        self.server = server
        if server is not None:  # in the server's namespaces; its session, limits, cwd, log and env set after fork
            self.sandbox = server.sandbox
            self.proc = server.spawn(address, self.key, env, self.dir, self.log_path, self.limits)
        else:
            self.sandbox = containment(*sandbox_paths(writable, cache_dir)) if sandbox else \
                Containment(notes=["sandbox turned off by the caller"])
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    [*self.sandbox.prefix, sys.executable, "-m", "kernelcraft.verify.worker", address],
                    stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.dir,
                    start_new_session=True, preexec_fn=preexec(self.limits))
            self.proc.stdin.write(self.key.hex().encode() + b"\n")
            self.proc.stdin.close()
        self.start_timeout = start_timeout
        self.started = time.monotonic()
        self.conn = None
        self.info: dict = {}
        # Once a candidate is loaded the worker runs only while it serves a request: frozen (SIGSTOP, its whole group)
        # between them, so nothing it leaves running (threads, processes) can work while anything else is timed.
        self.freeze_between = False

    def ready(self) -> dict:
        if self.conn is None:
            self.listener._listener._socket.settimeout(1.0)
            while self.conn is None:
                try:
                    self.conn = self.listener.accept()
                except OSError:  # socket.timeout included: look whether the worker is still starting
                    code = self.proc.poll()
                    if code is not None or time.monotonic() - self.started > self.start_timeout:
                        self.kill()
                        raise WorkerDied(f"the worker did not start (status {code}): {self.log_tail()}",
                                         code) from None
            self.info = self.ask(None, self.start_timeout)
        return self.info

    def containment_info(self) -> dict:
        return {"network_off": self.sandbox.network_off, "harness_read_only": self.sandbox.harness_read_only,
                "withheld_env": self.stripped, "notes": self.sandbox.notes,
                "limits": {"max_processes": self.limits.max_processes, "max_host_memory": self.limits.host_memory(),
                           "max_disk_bytes": self.limits.max_disk_bytes, "max_file_bytes": self.limits.max_file_bytes}}

    def ask(self, request: dict | None, timeout: float, poll: float = 0.25):
        """Send a request (None: just wait) and return the reply within `timeout` seconds.

        While it waits it watches the worker from outside; past a limit the group is killed.
        """
        try:
            if request is not None:
                if self.freeze_between:
                    self.signal(signal.SIGCONT)
                self.conn.send(request)
            deadline = time.monotonic() + timeout
            while not self.conn.poll(poll):
                over = breach(self.proc.pid, self.dir, self.limits)
                if over:
                    self.kill()
                    raise WorkerLimit(*over)
                self._no_escapes()
                if time.monotonic() > deadline:
                    raise WorkerTimeout(f"no answer within {timeout:.0f} s")
            reply = self.conn.recv_bytes()
            if self.freeze_between:
                self.signal(signal.SIGSTOP)
                self._no_escapes()
            return safe_loads(reply, self.cuda_index)
        except (EOFError, ConnectionError, OSError) as exc:
            code = self._wait_exit()
            raise WorkerDied(self._death_message(code, exc), code) from None

    def _wait_exit(self, grace: float = 2.0) -> int | None:
        try:
            return self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            return None

    def _death_message(self, code: int | None, exc: Exception) -> str:
        if code is None:
            what = f"the worker closed its channel ({type(exc).__name__}) but did not exit"
        elif code < 0:
            what = f"the worker was killed by {signal.Signals(-code).name}"
        else:
            what = f"the worker exited with status {code} in the middle of a request"
        tail = self.log_tail()
        return f"{what}" + (f"; its last output:\n{tail}" if tail else "")

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def signal(self, sig: int) -> None:
        """Send `sig` to the worker's whole group and tree (SIGSTOP / SIGCONT: frozen between requests), a process
        of it in a session of its own included."""
        signal_tree(self.proc.pid, sig)

    def _no_escapes(self) -> None:
        """With a candidate loaded (its code may have run), no process may have left the worker's tree: one orphaned
        on purpose (a child that starts a session of its own, forks and exits) would run on between requests and
        after the worker's kill, where baselines and later candidates are timed. The fork server takes in every
        orphan below it (containment.become_subreaper); each it holds that is no worker is killed here, and the
        candidate with it (`process_escaped`). A spawned worker's orphans go to the host's init, unseen."""
        if self.server is None or not self.freeze_between:
            return
        gone = self.server.escaped()
        if gone:
            self.kill()
            raise WorkerLimit("process_escaped", f"{len(gone)} process(es) the candidate started left the worker's "
                              f"process tree (orphaned on purpose, to run on outside it); killed", status="rejected")

    def kill(self, wait: bool = True) -> None:
        """Kill the worker's whole process group and tree; with `wait`, wait for its exit and remove its directory,
        else leave that to `reap` (from any thread: a GPU worker's exit, its context torn down, takes tens of ms)."""
        killed = kill_tree(self.proc.pid)  # not just the leader: whatever the candidate started goes too
        if self.server is not None:  # its children, dying, are taken in by the server: none is an escape
            self.server.killed(killed)
        if wait:
            self.reap()

    def reap(self) -> None:
        """Wait (up to 5 s) for the killed worker's exit, then close its channel and remove its directory."""
        self._wait_exit(5.0)
        close_channel(self.conn, self.listener, self.dir)


def sandbox_paths(writable: list[Path] = (),
                  cache_dir: Path | None = None) -> tuple[list[Path], list[Path], list[Path]]:
    """(read-only, writable, hidden) paths of a worker's mount namespace (containment.containment). Read-only for the
    candidate: kernelcraft itself, every directory a later process imports from (the worker's PYTHONPATH, the
    interpreter's prefixes and site-packages, torch's and Triton's), the user's working directory and the inline
    build cache of `cache_dir` (a candidate's build writes its own part of it: verify/build.py). Writable: the
    temporary directory (its private one is inside), `writable`, `cache_dir` and the kernel caches. Hidden: the
    user's key, the trusted directory of `cache_dir` and of the other caches this process authenticates so far
    (verify/trust.py: one made later is not hidden from a sandbox already started, but what is written there
    cannot be sealed without the key), and the NVRTC cache."""
    from kernelcraft.verify import trust
    from kernelcraft.verify.containment import installed_paths

    home_caches = [Path.home() / ".triton", Path.home() / ".cache"]
    imports = [Path(__file__).resolve().parents[2], *installed_paths(),
               *(Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(p))]
    read_only = [Path(__file__).resolve().parents[1],
                 *(p for each in (*imports, Path.cwd()) for p in _protectable(each))]
    writable, hidden = [Path(tempfile.gettempdir()), *writable, *home_caches], [trust.key_dir(), *trust.known_dirs()]
    if cache_dir is not None:
        (Path(cache_dir) / "inline").mkdir(parents=True, exist_ok=True)  # made now: a candidate cannot plant it
        read_only.append(Path(cache_dir) / "inline")
        writable.append(Path(cache_dir))
        # the trusted caches, and NVRTC's cubins (keyed by source: one candidate could plant another's; a compile
        # costs 10-30 ms)
        hidden += [trust.trusted_dir(cache_dir), Path(cache_dir) / "nvrtc"]
    return read_only, writable, hidden


def _protectable(path: Path) -> list[Path]:
    """`path` (the user's working directory, an installed package's), unless protecting it would cover the system,
    the user's home or the temp dir."""
    tmp = Path(tempfile.gettempdir()).resolve()
    path = path.resolve()
    if path == Path("/") or path in tmp.parents or path == tmp or path == Path.home().resolve():
        return []
    return [path]
