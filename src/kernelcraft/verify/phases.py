"""Seconds an evaluation spends in each of its phases (Result.phases): worker_start, load, check, attribution and
time, and within time its parts (time.baselines, time.warm, time.measure, time.clock, time.rebaseline), so that
what a verdict costs can be read from the store (benchmarks/verdict_phases.py)."""

from __future__ import annotations

import contextlib
import time


class PhaseClock:
    """Seconds spent in each phase, recorded into a dict as each phase ends (added up where a phase recurs)."""

    def __init__(self, phases: dict):
        self.phases = phases

    @contextlib.contextmanager
    def __call__(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = round(self.phases.get(name, 0.0) + time.perf_counter() - start, 4)
