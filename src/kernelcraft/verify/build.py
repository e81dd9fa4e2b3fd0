"""The build stage: slow C++/CUDA builds run in a pool of CPU processes ahead of the GPU.

Each build imports the candidate in a fresh subprocess with no GPU visible, `load_inline` routed
through the source-hash cache (backends.cuda_inline), and a time limit. The GPU worker that later
imports the same candidate finds the build done. Outcomes are cached by (source, target) too, so a
candidate is built once however often it is evaluated.

Importing a candidate runs its code, so a build is contained like a worker (containment.py): its own network
and mount namespaces where the OS allows (the harness, the installed packages, the user's files, the temp dir
and the rest of the cache read-only; the trusted caches hidden), the resource limits, a scrubbed environment, a
private temp dir, the same watch over its tree, memory and disk; where there are no namespaces the outcome's
`notes` say so. Cross-candidate poisoning of the inline build cache is closed by giving each candidate a part of
it of its own (`inline_cache`: inline/<source sha>-<arch>/): the one part its build can write; every other
sandbox, its own workers included, sees the whole cache read-only and loads the build recorded there. (The
alternative, a trusted hash of each artifact checked before a worker loads it, leaves a window between the check
and the load for a candidate on another device to swap the file; a read-only mount has none.) The price: two
candidates whose C++ is the same are built twice. The outcome records live in the trusted directory, sealed
(verify/trust.py): a record that does not authenticate is built again. After each build the harness's files
are checked (verify/integrity.py), and while a build runs too: a build that rewrites them is killed at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kernelcraft.candidate import Candidate
from kernelcraft.verify import trust as trust_mod
from kernelcraft.verify.containment import Limits, breach, containment, preexec


@dataclass
class BuildOutcome:
    ok: bool
    seconds: float
    log: str = ""
    object_only: bool = False  # CUDA compiled to objects only: this torch cannot link them
    deferred: str = ""  # the import failed for a reason that is not a build error; the worker decides
    resources: list[dict] = field(default_factory=list)
    cached: bool = False
    notes: list[str] = field(default_factory=list)  # what the build's containment could not do here


KIND = "build_outcome"


def build_key(source: str, arch_list: str) -> str:
    """A build's key: the candidate's source hash (Candidate.sha) and the target."""
    return f"{hashlib.sha256(source.encode()).hexdigest()[:16]}-{arch_list.replace(';', '_').replace('.', '')}"


def inline_cache(cache_dir: Path, source: str, arch_list: str) -> Path:
    """The part of the inline build cache that one candidate's build writes and its workers load from."""
    return Path(cache_dir) / "inline" / build_key(source, arch_list)


class BuildPool:
    def __init__(self, cache_dir: Path, workers: int | None = None, timeout: float = 900.0,
                 trust: trust_mod.Trust | None = None, sandbox: bool = True, limits: Limits | None = None,
                 integrity=None):
        """`trust` seals the outcome records (default: the cache's, verify/trust.py); `sandbox`, `limits`: the
        builds' containment, as the workers'; `integrity` (verify/integrity.Integrity): checked while and after each
        build."""
        self.cache_dir = Path(cache_dir)
        self.timeout = timeout
        self.trust = trust or trust_mod.for_verifier(self.cache_dir, sandbox)
        self.sandbox, self.limits, self.integrity = sandbox, limits or Limits(), integrity
        self.pool = ThreadPoolExecutor(max_workers=workers or max(1, min(8, (os.cpu_count() or 2) - 1)),
                                       thread_name_prefix="kernelcraft-build")
        self._lock = threading.Lock()
        self._inflight: dict[str, Future] = {}
        self._stopping = False  # abort(): builds in progress are killed at their next check

    def submit(self, candidate: Candidate, arch_list: str) -> Future:
        key = build_key(candidate.source, arch_list)
        with self._lock:
            if key not in self._inflight:
                self._inflight[key] = self.pool.submit(self._build, candidate, arch_list, key)
            return self._inflight[key]

    def _build(self, candidate: Candidate, arch_list: str, key: str) -> BuildOutcome:
        record = trust_mod.trusted_dir(self.cache_dir) / "outcomes" / f"{key}.json"
        outcome = self._recorded(record, key)
        if outcome is not None:
            return outcome
        def watch():  # a change to the harness, or the verifier stopping, kills the build (and it is not recorded)
            if self._stopping:
                return "the verifier was stopped"
            return self.integrity.check() if self.integrity is not None else None

        outcome = run_build(candidate.source, inline_cache(self.cache_dir, candidate.source, arch_list), arch_list,
                            self.timeout, sandbox=self.sandbox, cache_dir=self.cache_dir, limits=self.limits,
                            watch=watch)
        if watch is not None and watch():
            return outcome
        if outcome.ok and not outcome.deferred:
            record.parent.mkdir(parents=True, exist_ok=True)
            tmp = record.with_name(f".{record.name}.{os.getpid()}.{threading.get_ident()}")
            tmp.write_text(json.dumps(self.trust.seal_json(KIND, key, asdict(outcome))))
            tmp.replace(record)
        return outcome

    def _recorded(self, record: Path, key: str) -> BuildOutcome | None:
        """The outcome recorded for `key`, if its record authenticates (one that does not is built again)."""
        try:
            sealed = json.loads(record.read_text())
        except (OSError, ValueError):
            return None
        entry = self.trust.open_json(KIND, key, sealed)
        try:
            outcome = BuildOutcome(**entry) if isinstance(entry, dict) else None
        except TypeError:  # a record of another kernelcraft's fields
            return None
        if outcome is not None:
            outcome.cached = True
        return outcome

    def abort(self) -> None:
        """Stop (Ctrl-C): builds not started are dropped, those running killed within a second."""
        self._stopping = True
        self.pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def run_build(source: str, build_cache: Path, arch_list: str, timeout: float, *, sandbox: bool = True,
              cache_dir: Path | None = None, limits: Limits | None = None, watch=None) -> BuildOutcome:
    """Build one candidate in a fresh subprocess, contained like a worker (its own process group, killed on timeout,
    on a limit, or as soon as `watch()` names a change to the harness). `build_cache`: the candidate's own part of
    the inline cache, the one place outside its private directory it may write; `cache_dir`: the verifier's cache
    (read-only to the build, its trusted part hidden)."""
    from kernelcraft.verify.containment import Containment
    from kernelcraft.verify.process import worker_environment

    limits = limits or Limits()
    build_cache = Path(build_cache)
    build_cache.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kernelcraft-build-") as tmp:
        here = Path(tmp)
        src, out = here / "candidate.py", here / "outcome.json"
        src.write_text(source)
        env, _ = worker_environment({"CUDA_VISIBLE_DEVICES": "", "TORCH_CUDA_ARCH_LIST": arch_list, "TMPDIR": tmp,
                                     "TRITON_CACHE_DIR": str(here / "triton"),
                                     "TORCHINDUCTOR_CACHE_DIR": str(here / "inductor")})
        box = containment(*build_paths(here, build_cache, cache_dir)) if sandbox else \
            Containment(notes=["sandbox turned off by the caller"])
        notes = [f"build: {note}" for note in box.notes]
        with open(here / "build.log", "wb") as log:
            proc = subprocess.Popen([*box.prefix, sys.executable, "-m", "kernelcraft.verify.build", str(src),
                                     str(build_cache), str(out)], stdout=log, stderr=subprocess.STDOUT,
                                    env=env, cwd=tmp, start_new_session=True, preexec_fn=preexec(limits))
            stopped = _watch(proc, here, limits, timeout, watch)
        if stopped:
            return BuildOutcome(False, time.perf_counter() - start, stopped, notes=notes)
        outcome = _read_outcome(out)
        if outcome is None:
            tail = (here / "build.log").read_text(errors="replace").strip().splitlines()[-15:]
            return BuildOutcome(False, time.perf_counter() - start,
                                f"the build process died (status {proc.returncode}):\n" + "\n".join(tail), notes=notes)
    outcome.seconds = time.perf_counter() - start
    outcome.notes = notes
    return outcome


def build_paths(private: Path, build_cache: Path, cache_dir: Path | None) -> tuple[list[Path], list[Path], list[Path]]:
    """(read-only, writable, hidden) paths of a build's namespace: a worker's read-only set (process.sandbox_paths)
    and the temp dir, the user's home and the cache besides; writable only its private directory and its own part
    of the inline cache; the trusted caches hidden. Nothing a build writes outlives it but its own build."""
    from kernelcraft.verify.process import _protectable, sandbox_paths

    read_only, _, hidden = sandbox_paths()
    tmp, home = Path(tempfile.gettempdir()).resolve(), Path.home().resolve()
    read_only.append(tmp)
    if home != Path("/") and home != tmp and home not in tmp.parents:
        read_only.append(home)
    if cache_dir is not None:
        read_only += _protectable(Path(cache_dir))
        hidden.append(trust_mod.trusted_dir(cache_dir))
    return read_only, [private, build_cache], hidden


def _watch(proc: subprocess.Popen, private: Path, limits: Limits, timeout: float, watch) -> str:
    """Wait for the build process; kill its group and say why if it goes over a limit or its time, or if `watch()`
    (checked about once a second) names a change to the harness. "" when it ended by itself."""
    deadline, next_watch = time.monotonic() + timeout, 0.0
    while True:
        try:
            proc.wait(timeout=0.25)
            return ""
        except subprocess.TimeoutExpired:
            pass
        why = ""
        over = breach(proc.pid, private, limits)
        if over:
            why = f"the build went over a limit ({over[0]}): {over[1]}; its process group was killed"
        elif watch is not None and time.monotonic() >= next_watch:
            next_watch = time.monotonic() + 1.0
            changed = watch()
            why = f"harness_tampered: {changed}; the build's process group was killed" if changed else ""
        if not why and time.monotonic() > deadline:
            why = f"build timed out after {timeout:.0f} s"
        if why:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
            return why


def _read_outcome(path: Path) -> BuildOutcome | None:
    """The outcome the build process wrote (a candidate's process: only the fields an outcome has, of their types)."""
    try:
        data = json.loads(path.read_text())
        fields = {f: data[f] for f in ("ok", "seconds", "log", "object_only", "deferred", "resources") if f in data}
        outcome = BuildOutcome(**fields)
    except (OSError, ValueError, TypeError):
        return None
    if not (isinstance(outcome.ok, bool) and isinstance(outcome.log, str) and isinstance(outcome.deferred, str)
            and isinstance(outcome.object_only, bool) and isinstance(outcome.resources, list)):
        return None
    return outcome


def _main(src: str, build_cache: str, out: str) -> None:
    """Inside the build subprocess: import the candidate with builds routed through the cache."""
    import importlib.util

    from kernelcraft.backends import importing
    from kernelcraft.backends.cuda_inline import ObjectOnlyBuild, ptxas_summary
    from kernelcraft.backends.errors import CompileError

    records: list = []
    outcome = BuildOutcome(True, 0.0)
    try:
        with importing(Path(build_cache), records, Path(src).read_text()):
            spec = importlib.util.spec_from_file_location("kernelcraft_candidate", src)
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
    except ObjectOnlyBuild:
        outcome.object_only = True
    except CompileError as exc:
        outcome = BuildOutcome(False, 0.0, exc.log)
    except BaseException as exc:  # noqa: BLE001 - not a build failure; the worker will judge it
        outcome.deferred = f"{type(exc).__name__}: {exc}"[:500]
    if outcome.ok:
        outcome.log = "\n".join(r.log for r in records if r.log)
    outcome.resources = ptxas_summary(outcome.log)
    Path(out).write_text(json.dumps(asdict(outcome)))


if __name__ == "__main__":
    _main(*sys.argv[1:4])
    sys.stdout.flush()
    os._exit(0)
