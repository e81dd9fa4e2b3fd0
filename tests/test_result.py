"""result.py: the verifier's verdict, typed: its status an enum, JSON and back, from an older or newer shape."""

from __future__ import annotations

import json

import pytest

import kernelcraft
from kernelcraft.result import STATUSES, Result, Status, Timing


def test_the_status_is_an_enum_that_is_also_its_string():
    assert STATUSES == tuple(s.value for s in Status) and Status.OK == "ok" and f"{Status.TIMEOUT}" == "timeout"
    assert json.dumps({"status": Status.INCORRECT}) == '{"status": "incorrect"}'
    assert kernelcraft.Result is Result and kernelcraft.Status is Status and kernelcraft.Timing is Timing


def test_the_first_failure_decides_the_status():
    r = Result("p", "c", "triton")
    assert r.status is None and not r.failed
    r.fail("incorrect", "mismatch", "trial 1: 3 of 10 elements differ").fail(Status.TIMEOUT, "timed_out")
    assert r.status is Status.INCORRECT and r.reasons == ["mismatch", "timed_out"] and r.failed
    with pytest.raises(ValueError):
        r.fail("no_such_status", "x")


def test_a_result_round_trips_and_a_newer_stores_fields_are_dropped():
    r = Result("p", "c", "triton")
    r.fail("incorrect", "mismatch", "trial 1: 3 of 10 elements differ")
    d = r.to_dict()
    assert d["status"] == "incorrect" and Result.from_dict(d) == r
    assert Result.from_dict(d | {"added_in_a_later_version": 1}) == r
    assert Result.from_dict({"problem": "p", "candidate": "c", "backend": "triton"}).status is None
    with pytest.raises(ValueError):
        Result.from_dict(d | {"status": "no_such_status"})


def test_derived_figures_and_the_spread_come_from_the_timings():
    t = Timing(0.5, 0.02, 0.01, 40, 0.49, "cuda_events+l2_flush")
    r = Result("p", "c", "triton", Status.OK, True, runtime=t, eager=Timing(1.0, 0.1, 0.01, 40, 0.9, "x"))
    assert (r.runtime_ms, r.eager_ms, r.compile_ms, r.timing_method) == (0.5, 1.0, None, "cuda_events+l2_flush")
    assert r.spread() == (0.5, 0.02) and r.spread("eager") == (1.0, 0.1) and r.spread("compiled") is None
    assert r.trusted
    r.review_resolved = False  # a speedup flagged for review that could not be confirmed
    assert not r.trusted


def test_a_call_costs_its_median_or_its_host_time_where_that_is_longer():
    """Timing.cost_ms: the host's time a call is a floor (a loop of calls runs no faster than its host issues them);
    the derived times, the spread and `faster_than` all use it; where the host was not measured, the median."""
    light = Timing(0.05, 0.001, 0.01, 50, 0.049, "cuda_events+l2_flush", host_ms=0.054, device_ms=0.0499)
    heavy = Timing(0.1403, 0.004, 0.02, 50, 0.13, "cuda_events+l2_flush", host_ms=0.1526, device_ms=0.0497)
    device_bound = Timing(2.0, 0.01, 0.01, 50, 1.99, "cuda_events+l2_flush", host_ms=0.3, device_ms=1.99)
    assert (light.cost_ms, heavy.cost_ms, device_bound.cost_ms) == (0.054, 0.1526, 2.0)
    assert Timing(0.5, 0.02, 0.01, 40, 0.49, "cpu_perf_counter").cost_ms == 0.5  # not measured: the median
    r = Result("p", "c", "triton", Status.OK, True, runtime=light, compiled=heavy)
    assert (r.runtime_ms, r.compile_ms) == (0.054, 0.1526) and r.spread() == (0.054, 0.001)
    assert r.to_dict()["runtime_ms"] == 0.054 and Result.from_dict(r.to_dict()).runtime == light
    # by medians 0.0403 apart; by cost 0.0986: faster either way; a median inside the spread is not made faster
    assert light.faster_than(heavy) and not heavy.faster_than(light)
    floored = Timing(0.05, 0.001, 0.01, 50, 0.049, "cuda_events+l2_flush", host_ms=0.2, device_ms=0.0499)
    assert heavy.faster_than(floored) and not floored.faster_than(heavy)  # 0.1526 against 0.2
