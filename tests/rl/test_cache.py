"""The verdict cache: the stored Result comes back, across processes' lifetimes; harness faults are not kept."""

from __future__ import annotations

from kernelcraft.result import Result, Status, Timing
from kernelcraft.rl import VerdictCache


def test_a_kept_verdict_is_the_result_itself_and_outlives_the_cache_object(tmp_path):
    r = Result("level1/relu", "c", "triton", status=Status.OK, correct=True, speedup_eager=1.3,
               runtime=Timing(1.0, 0.1, 0.01, 10, 0.9, "cpu_perf_counter"), reasons=["speedup_review"])
    cache = VerdictCache(tmp_path / "v.sqlite")
    assert cache.put("p", "c", "s", r) and len(cache) == 1
    cache.close()
    again = VerdictCache(tmp_path / "v.sqlite")
    got = again.get("p", "c", "s")
    assert isinstance(got, Result) and got.to_dict() == r.to_dict() and got.runtime == r.runtime
    assert again.get("p", "c", "other settings") is None and again.get("p", "other kernel", "s") is None
    fault = Result("level1/relu", "c", "triton").fail("verifier_error", "harness_oom", "oom")
    assert not again.put("p", "d", "s", fault) and again.get("p", "d", "s") is None
    again.close()
