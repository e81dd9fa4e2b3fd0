"""The build stage: slow C++/CUDA builds run in a pool of CPU processes ahead of the GPU.

Each build imports the candidate in a fresh subprocess with no GPU visible, `load_inline` routed
through the source-hash cache (backends.cuda_inline), and a time limit. The GPU worker that later
imports the same candidate finds the build done. Outcomes are cached by (source, target) too, so a
candidate is built once however often it is evaluated.
"""

from __future__ import annotations

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


@dataclass
class BuildOutcome:
    ok: bool
    seconds: float
    log: str = ""
    object_only: bool = False  # CUDA compiled to objects only: this torch cannot link them
    deferred: str = ""  # the import failed for a reason that is not a build error; the worker decides
    resources: list[dict] = field(default_factory=list)
    cached: bool = False


class BuildPool:
    def __init__(self, cache_dir: Path, workers: int | None = None, timeout: float = 900.0):
        self.cache_dir = Path(cache_dir)
        self.timeout = timeout
        self.pool = ThreadPoolExecutor(max_workers=workers or max(1, min(8, (os.cpu_count() or 2) - 1)),
                                       thread_name_prefix="kernelcraft-build")
        self._lock = threading.Lock()
        self._inflight: dict[str, Future] = {}

    def submit(self, candidate: Candidate, arch_list: str) -> Future:
        key = f"{candidate.sha}-{arch_list.replace(';', '_').replace('.', '')}"
        with self._lock:
            if key not in self._inflight:
                self._inflight[key] = self.pool.submit(self._build, candidate, arch_list, key)
            return self._inflight[key]

    def _build(self, candidate: Candidate, arch_list: str, key: str) -> BuildOutcome:
        record = self.cache_dir / "outcomes" / f"{key}.json"
        if record.exists():
            outcome = BuildOutcome(**json.loads(record.read_text()))
            outcome.cached = True
            return outcome
        outcome = run_build(candidate.source, self.cache_dir / "inline", arch_list, self.timeout)
        if outcome.ok and not outcome.deferred:
            record.parent.mkdir(parents=True, exist_ok=True)
            record.write_text(json.dumps(asdict(outcome)))
        return outcome

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def run_build(source: str, build_cache: Path, arch_list: str, timeout: float) -> BuildOutcome:
    """Build one candidate in a fresh subprocess (its own process group, killed on timeout)."""
    from kernelcraft.verify.process import worker_environment

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kernelcraft-build-") as tmp:
        src, out = Path(tmp) / "candidate.py", Path(tmp) / "outcome.json"
        src.write_text(source)
        env, _ = worker_environment({"CUDA_VISIBLE_DEVICES": "", "TORCH_CUDA_ARCH_LIST": arch_list,
                                     "TMPDIR": tmp})
        with open(Path(tmp) / "build.log", "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "kernelcraft.verify.build", str(src),
                                     str(build_cache), str(out)], stdout=log, stderr=subprocess.STDOUT,
                                    env=env, cwd=tmp, start_new_session=True)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return BuildOutcome(False, time.perf_counter() - start, f"build timed out after {timeout:.0f} s")
        if not out.exists():
            tail = (Path(tmp) / "build.log").read_text(errors="replace").strip().splitlines()[-15:]
            return BuildOutcome(False, time.perf_counter() - start,
                                f"the build process died (status {proc.returncode}):\n" + "\n".join(tail))
        outcome = BuildOutcome(**json.loads(out.read_text()))
    outcome.seconds = time.perf_counter() - start
    return outcome


def _main(src: str, build_cache: str, out: str) -> None:
    """Inside the build subprocess: import the candidate with builds routed through the cache."""
    import importlib.util

    from kernelcraft.backends.cuda_inline import ObjectOnlyBuild, cached_builds, ptxas_summary
    from kernelcraft.backends.errors import CompileError

    records: list = []
    outcome = BuildOutcome(True, 0.0)
    try:
        with cached_builds(Path(build_cache), records):
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
