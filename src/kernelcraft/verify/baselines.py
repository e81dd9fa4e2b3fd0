"""Baseline timings (PyTorch eager and torch.compile) cached per (problem, GPU, torch, policy, sizes).

Baselines are measured in a worker that has loaded no candidate code, so no candidate can slow the
reference it is compared with; eager and compiled calls are timed interleaved there. The cache is a
JSON file in the trusted directory (verify/trust.py: hidden from every candidate), written atomically, each
entry sealed with an HMAC: one that does not verify (forged, or from an older file) is not used, and is measured
again.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict
from pathlib import Path

from kernelcraft.problems.sizes import Sizes
from kernelcraft.result import Timing
from kernelcraft.verify.trust import Trust

KIND = "baseline"


class BaselineStore:
    def __init__(self, path: Path, trust: Trust | None = None):
        """`trust`: what seals the entries (default: a Trust over the file's own directory, which is not hidden from
        candidates: the verifier passes its trusted directory's)."""
        self.path = Path(path)
        self.trust = trust or Trust(self.path.parent, hide=False)
        self._lock = threading.Lock()

    @staticmethod
    def key(problem_sha: str, device: str, torch_version: str, policy: str, sizes: Sizes) -> str:
        """Sizes enter as a hash of the constants applied: two runs at different sizes never share a baseline."""
        return "|".join((problem_sha, device, torch_version, policy, f"sizes-{sizes.key()}"))

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, key: str, notes: list[str] | None = None) -> tuple[Timing | None, Timing | None] | None:
        """The cached (eager, compiled) timings of `key`, or None; an entry that does not authenticate is None too,
        and said in `notes`."""
        sealed = self._read().get(key)
        if sealed is None:
            return None
        entry = self.trust.open_json(KIND, key, sealed)
        if entry is None:
            if notes is not None:
                notes.append("untrusted_cache: the cached baseline of this problem does not authenticate (written by "
                             "no verifier of this cache's key): ignored and measured again")
            return None
        as_timing = lambda d: Timing(**d) if d else None  # noqa: E731
        return as_timing(entry.get("eager")), as_timing(entry.get("compile"))

    def invalidate(self, key: str) -> None:
        """Forget one entry: the next evaluation of that problem measures its baselines afresh."""
        with self._lock:
            data = self._read()
            if data.pop(key, None) is not None:
                self._write(data)

    def put(self, key: str, eager: Timing, compiled: Timing | None) -> None:
        with self._lock:
            data = self._read()
            data[key] = self.trust.seal_json(KIND, key, {
                "eager": asdict(eager), "compile": asdict(compiled) if compiled else None,
                "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
            self._write(data)

    def _write(self, data: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(self.path)
