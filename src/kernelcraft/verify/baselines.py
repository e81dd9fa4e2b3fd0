"""Baseline timings (PyTorch eager and torch.compile) cached per (problem, GPU, torch, policy, sizes).

Baselines are measured in a worker that has loaded no candidate code, so no candidate can slow the
reference it is compared with; eager and compiled calls are timed interleaved there. The cache is a
JSON file, written atomically.
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


class BaselineStore:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()

    @staticmethod
    def key(problem_sha: str, device: str, torch_version: str, policy: str, sizes: Sizes) -> str:
        """Sizes enter as a hash of the constants applied: two runs at different sizes never share a baseline."""
        return "|".join((problem_sha, device, torch_version, policy, f"sizes-{sizes.key()}"))

    def _read(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def get(self, key: str) -> tuple[Timing | None, Timing | None] | None:
        entry = self._read().get(key)
        if entry is None:
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
            data[key] = {"eager": asdict(eager), "compile": asdict(compiled) if compiled else None,
                         "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            self._write(data)

    def _write(self, data: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(self.path)
