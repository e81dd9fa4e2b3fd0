"""The baseline cache: entries keyed by problem, GPU, torch, policy and sizes; dropped on request."""

from __future__ import annotations

from kernelcraft.problems.sizes import Sizes
from kernelcraft.result import Timing
from kernelcraft.verify.baselines import BaselineStore


def timing(ms: float) -> Timing:
    return Timing(median_ms=ms, iqr_ms=0.1, cv=0.01, samples=20, min_ms=ms * 0.9, method="cpu_perf_counter")


def test_put_get_round_trip_and_keys_differ(tmp_path):
    store = BaselineStore(tmp_path / "baselines.json")
    full = store.key("abc", "NVIDIA H200", "2.11", "strict", Sizes({}, "full"))
    small = store.key("abc", "NVIDIA H200", "2.11", "strict", Sizes({"dim": 64}, "derived", {"dim": 4096}))
    other = store.key("abc", "NVIDIA H200", "2.11", "strict", Sizes({"dim": 128}, "derived", {"dim": 4096}))
    same = store.key("abc", "NVIDIA H200", "2.11", "strict", Sizes({"dim": 64}, "full+user", {"dim": 4096}))
    assert len({full, small, other}) == 3  # the sizes themselves, not only small or full, tell entries apart
    assert same == small  # the same constants share a baseline whatever chose them
    store.put(full, timing(2.0), timing(1.5))
    eager, compiled = BaselineStore(tmp_path / "baselines.json").get(full)  # read back from disk
    assert (eager.median_ms, compiled.median_ms) == (2.0, 1.5)
    assert store.get(small) is None


def test_invalidate_drops_only_that_entry(tmp_path):
    store = BaselineStore(tmp_path / "baselines.json")
    a, b = (store.key(sha, "cpu", "2.13", "strict", Sizes({}, "full")) for sha in "ab")
    store.put(a, timing(1.0), None)
    store.put(b, timing(3.0), None)
    store.invalidate(a)
    assert store.get(a) is None
    assert store.get(b)[0].median_ms == 3.0
    store.invalidate("never-there")  # no error, nothing lost
    assert store.get(b) is not None
