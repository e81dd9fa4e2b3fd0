"""A fork server for workers: one process per supervisor that has already imported torch, Triton and the worker's
modules (never initialising CUDA), and forks a fresh worker for each request.

A spawned worker spends 1.7-2.8 s of CPU importing torch before it can initialise CUDA; on a host of several GPUs
those start-ups run together and slow each other (docs/cluster.md). A worker forked from here starts with the
imports done. Each one is still a process of its own, used for one candidate and then killed, so nothing a
candidate does to torch or to the process outlives it: the server's own copy of every module is never touched by
candidate code.

What a spawned worker gets, a forked one gets too, set in the child before the worker runs: its own session (so
a kill takes its whole group), the resource limits, its private directory as cwd and TMPDIR, its log as stdout
and stderr, the supervisor's scrubbed environment (os.environ; /proc/PID/environ keeps the server's own, as it was at its
exec, scrubbed the same way). The server itself is started like a worker (the same
namespace prefix, so every worker it forks shares its network and mount namespaces, and a scrubbed
environment), drops every capability and makes itself non-dumpable before it imports anything (containment.harden:
a candidate in a forked child can neither mount over what later workers read in the namespace they share, nor read
or write the server's or a sibling's memory), and CUDA is initialised only in the forked child, after
CUDA_VISIBLE_DEVICES is its own. The child
closes its copy of the server's channel before running anything, so a candidate cannot ask the server for
anything. The server reaps its children and answers for their exit status (Popen's convention: -N for signal N).
When it ends (told to exit; or its supervisor gone without a word, killed outright; or sent SIGTERM or SIGHUP), it
kills every worker it forked that still runs: a worker frozen between requests would otherwise stay stopped for
good, holding its memory.

    python -m kernelcraft.verify.forkserver ADDRESS   (the channel's key on stdin; started by ForkServer)
"""

from __future__ import annotations

import ctypes
import importlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import asdict
from multiprocessing.connection import Client, Listener
from pathlib import Path

from kernelcraft.verify.containment import (Containment, Limits, become_subreaper, children, containment, harden,
                                            kill_tree, preexec)

# What the server imports before it forks: the worker's own imports and what nearly every candidate imports.
# Optional ones (absent on a CPU-only install) are skipped.
PRELOAD = ("torch", "torch.multiprocessing", "kernelcraft.verify.worker", "kernelcraft.verify.inputs",
           "kernelcraft.verify.timing", "kernelcraft.verify.check", "triton", "triton.language")
UNKNOWN_EXIT = 255  # the exit status of a child whose server is gone (nobody reaped it for us)


def close_channel(conn, listener: Listener, directory: Path) -> None:
    """The last step of ending a worker or the server: close its channel's connection (None if it never connected)
    and listener, ignoring one the other side already broke, and remove its private directory. Here rather than in
    process.py, which imports this module."""
    for closable in (conn, listener):
        try:
            if closable is not None:
                closable.close()
        except OSError:
            pass
    shutil.rmtree(directory, ignore_errors=True)


class ForkServerError(Exception):
    """The fork server did not start, or stopped answering."""


class ForkedProcess:
    """A worker forked by the server: the part of Popen's interface a WorkerProcess uses (pid, poll, wait)."""

    def __init__(self, pid: int, server: ForkServer):
        self.pid = pid
        self.server = server
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.status(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout)
            time.sleep(0.02)
        return self.returncode


class ForkServer:
    """The supervisor's side: starts the server (like a worker: namespace prefix, scrubbed environment, own
    session), then asks it for workers. Thread-safe; `close` ends it and every worker it forked that still runs
    (their owners kill them first; one left frozen would stay stopped for good)."""

    def __init__(self, env: dict[str, str], read_only: list[Path], writable: list[Path], hidden: list[Path] = (),
                 sandbox: bool = True, start_timeout: float = 120.0):
        """`read_only`, `writable`, `hidden`: the namespace's paths (process.sandbox_paths)."""
        self.dir = Path(tempfile.mkdtemp(prefix="kernelcraft-forkserver-"))
        key = secrets.token_bytes(32)
        self.listener = Listener(str(self.dir / "channel.sock"), family="AF_UNIX", authkey=key)
        self.sandbox = containment(read_only, [self.dir, *writable], hidden) if sandbox else \
            Containment(notes=["sandbox turned off by the caller"])
        self.log_path = self.dir / "server.log"
        self._lock = threading.Lock()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [*self.sandbox.prefix, sys.executable, "-m", "kernelcraft.verify.forkserver",
                 self.listener.address], stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                env={**env, "TMPDIR": str(self.dir), "KERNELCRAFT_SPAWNED_AT": f"{time.time():.6f}"}, cwd=self.dir,
                start_new_session=True)
        self.proc.stdin.write(key.hex().encode() + b"\n")
        self.proc.stdin.close()
        self.conn = None
        self.spawned: set[int] = set()  # the workers forked here: every other child of the server is an orphan
        self.ended: set[int] = set()  # processes of workers' trees killed here (dying, they may be its children)
        self.info = self._handshake(start_timeout)

    def _handshake(self, timeout: float) -> dict:
        started = time.monotonic()
        self.listener._listener._socket.settimeout(1.0)
        while self.conn is None:
            try:
                self.conn = self.listener.accept()
            except OSError:  # socket.timeout included: is the server still starting?
                if self.proc.poll() is not None or time.monotonic() - started > timeout:
                    self.close()
                    raise ForkServerError(f"the fork server did not start: {self.log_tail()}") from None
        info = self.conn.recv() if self.conn.poll(timeout) else {"error": f"no word within {timeout:.0f} s"}
        if not info.get("ready"):
            self.close()
            raise ForkServerError(f"the fork server is not ready: {info.get('error')}; {self.log_tail()}")
        return info

    def alive(self) -> bool:
        return self.conn is not None and self.proc.poll() is None

    def _ask(self, request: dict, timeout: float = 30.0) -> dict:
        with self._lock:
            if self.conn is None:
                raise ForkServerError("the fork server is closed")
            try:
                self.conn.send(request)
                if not self.conn.poll(timeout):
                    raise ForkServerError(f"no answer to {request['op']!r} within {timeout:.0f} s")
                return self.conn.recv()
            except (EOFError, OSError) as exc:
                raise ForkServerError(f"the fork server is gone ({type(exc).__name__}): {self.log_tail()}") from None

    def spawn(self, address: str, key: bytes, env: dict[str, str], cwd: Path, log: Path,
              limits: Limits) -> ForkedProcess:
        """A worker forked to connect to `address` with `key`, as `python -m kernelcraft.verify.worker` would."""
        reply = self._ask({"op": "spawn", "address": address, "key": key.hex(), "env": env, "cwd": str(cwd),
                           "log": str(log), "limits": asdict(limits)})
        if "error" in reply:
            raise ForkServerError(reply["error"])
        self.spawned.add(reply["pid"])
        return ForkedProcess(reply["pid"], self)

    def escaped(self) -> list[int]:
        """The processes that left a worker's tree: orphans the server (a subreaper: containment.become_subreaper)
        took in, which are no worker of its own. Each is killed with its tree; their pids."""
        if not self.info.get("subreaper"):
            return []
        with self._lock:
            known = self.spawned | self.ended
        orphans = [pid for pid in children(self.proc.pid) if pid not in known]
        for pid in orphans:
            self.killed(kill_tree(pid))
        return orphans

    def killed(self, pids: list[int]) -> None:
        """`pids` were killed by their owner: taken in by the server while they die, they are not escapes."""
        with self._lock:
            self.ended.update(pids)

    def status(self, pid: int) -> int | None:
        """A child's exit status (None while it runs); UNKNOWN_EXIT once it is gone and the server with it."""
        if self.alive():
            try:
                return self._ask({"op": "status", "pid": pid})["code"]
            except ForkServerError:
                pass
        try:
            os.kill(pid, 0)
            return None
        except ProcessLookupError:
            return UNKNOWN_EXIT
        except PermissionError:
            return None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").strip().splitlines()[-lines:])
        except OSError:
            return ""

    def close(self) -> None:
        if self.alive():
            try:
                with self._lock:
                    self.conn.send({"op": "exit"})
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        close_channel(self.conn, self.listener, self.dir)
        self.conn = None


# -- the server process -------------------------------------------------------------------------------------------


def _preload() -> list[str]:
    loaded = []
    for name in PRELOAD:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except ImportError:
            continue
    return loaded


def _cuda_initialised() -> bool:
    """Whether CUDA was initialised in this process (torch's lazy init, or cuInit by anyone): a child forked after
    that cannot use CUDA. Importing torch maps the driver library without initialising it; cuDeviceGetCount on
    the library already loaded answers CUDA_ERROR_NOT_INITIALIZED (3) until cuInit has run, and initialises
    nothing itself."""
    import torch

    if torch.cuda.is_initialized():
        return True
    try:
        driver = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD)  # only if already loaded: never loads it
    except OSError:
        return False
    count = ctypes.c_int(0)
    return driver.cuDeviceGetCount(ctypes.byref(count)) != 3


def _reap(exits: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        exits[pid] = os.waitstatus_to_exitcode(status)


def _child(conn, request: dict) -> None:
    """In the forked child: become the worker a spawn would have started, then run it. Never returns."""
    try:
        conn.close()  # the server's channel stays the server's: a candidate cannot reach it
        for sig in (signal.SIGTERM, signal.SIGHUP):  # the server's handlers are not the worker's
            signal.signal(sig, signal.SIG_DFL)
        os.setsid()
        preexec(Limits(**request["limits"]))()
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # TMPDIR is the worker's own now
        from kernelcraft.verify import worker

        sys.argv = [worker.__file__, request["address"]]
        worker.run(request["address"], bytes.fromhex(request["key"]), "fork")
    except BaseException:  # noqa: BLE001 - whatever stops the child is told in its log
        traceback.print_exc()
        sys.stderr.flush()
    os._exit(1)


def main() -> None:
    address = sys.argv[1]
    key = bytes.fromhex(sys.stdin.readline().strip())
    sys.stdin.close()
    harden()  # no capability and not dumpable, nor any child forked from here (containment.harden)
    subreaper = become_subreaper()  # a process orphaned below a worker comes here, to be found (ForkServer.escaped)
    loaded = _preload()
    spawned = float(os.environ.get("KERNELCRAFT_SPAWNED_AT") or time.time())
    conn = Client(address, family="AF_UNIX", authkey=key)
    if _cuda_initialised():  # its children could not use CUDA: say so and stop
        conn.send({"ready": False, "error": "CUDA was initialised while the fork server imported " + ", ".join(loaded)})
        conn.close()
        os._exit(1)
    conn.send({"ready": True, "pid": os.getpid(), "preloaded": loaded, "ready_s": round(time.time() - spawned, 4),
               "subreaper": subreaper})
    exits: dict[int, int] = {}
    children: set[int] = set()
    for sig in (signal.SIGTERM, signal.SIGHUP):  # stopped from outside: as when the supervisor is gone
        signal.signal(sig, _gone)
    try:
        _serve(conn, exits, children)
    except _SupervisorGone:
        pass
    _end_workers(children, exits)  # told to exit or not: no worker outlives its server
    conn.close()
    os._exit(0)


class _SupervisorGone(Exception):
    """The supervisor closed the channel without a word (killed outright), or the server was told to stop."""


def _gone(signum, frame) -> None:
    raise _SupervisorGone(signum)


def _end_workers(children: set[int], exits: dict[int, int]) -> None:
    """Kill every worker forked here that still runs, with its group. A worker is frozen (SIGSTOP) between requests
    in a session of its own: where its supervisor died, or closed the server without killing it (a test suite left
    one frozen worker behind a run), nothing else would ever end it, and it kept its memory (a GPU's too)."""
    _reap(exits)
    for pid in children - exits.keys():
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _serve(conn, exits: dict[int, int], children: set[int]) -> None:
    """Answer the supervisor until it says exit; _SupervisorGone where it is gone."""
    while True:
        _reap(exits)
        try:
            if not conn.poll(0.1):
                continue
            request = conn.recv()
        except (EOFError, OSError):  # the supervisor is gone
            raise _SupervisorGone() from None
        op = request.get("op")
        if op == "exit":
            return
        if op == "status":
            _reap(exits)
            conn.send({"code": exits.get(request["pid"])})
        elif op == "spawn":
            sys.stdout.flush()
            sys.stderr.flush()
            try:
                pid = os.fork()
            except OSError as exc:
                conn.send({"error": f"fork failed: {exc}"})
                continue
            if pid == 0:
                _child(conn, request)
            children.add(pid)
            conn.send({"pid": pid})
        else:
            conn.send({"error": f"unknown request {op!r}"})


if __name__ == "__main__":
    main()
