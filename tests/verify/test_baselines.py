"""The baseline cache: entries keyed by problem, GPU, torch, policy and sizes; dropped on request."""

from __future__ import annotations

from kernelcraft.verify.baselines import BaselineStore
from kernelcraft.verify.result import Timing


def timing(ms: float) -> Timing:
    return Timing(median_ms=ms, iqr_ms=0.1, cv=0.01, samples=20, min_ms=ms * 0.9, method="cpu_perf_counter")


def test_put_get_round_trip_and_keys_differ(tmp_path):
    store = BaselineStore(tmp_path / "baselines.json")
    full = store.key("abc", "NVIDIA H200", "2.11", "strict", small=False)
    small = store.key("abc", "NVIDIA H200", "2.11", "strict", small=True)
    assert full != small
    store.put(full, timing(2.0), timing(1.5))
    eager, compiled = BaselineStore(tmp_path / "baselines.json").get(full)  # read back from disk
    assert (eager.median_ms, compiled.median_ms) == (2.0, 1.5)
    assert store.get(small) is None


def test_invalidate_drops_only_that_entry(tmp_path):
    store = BaselineStore(tmp_path / "baselines.json")
    a, b = store.key("a", "cpu", "2.13", "strict", False), store.key("b", "cpu", "2.13", "strict", False)
    store.put(a, timing(1.0), None)
    store.put(b, timing(3.0), None)
    store.invalidate(a)
    assert store.get(a) is None
    assert store.get(b)[0].median_ms == 3.0
    store.invalidate("never-there")  # no error, nothing lost
    assert store.get(b) is not None
