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


def test_a_call_costs_the_device_time_or_the_host_time_whichever_is_longer():
    """Timing.cost_ms: a loop of calls runs no faster than its host issues them. The device's time is the median
    where the host's fit in the lead, else the device-only time (the median then holds host time past the lead);
    the derived times, the spread and `faster_than` use the cost; without host times, the median."""
    def timing(median, host=None, device=None, lead=0.088):
        return Timing(median, 0.001, 0.01, 50, median, "cuda_events+l2_flush", host, device, lead)

    device_bound = timing(2.0, host=0.3, device=1.99)  # host past the lead, but the device's time is longer
    assert device_bound.cost_ms == 1.99
    assert timing(2.0, host=0.05, device=1.98).cost_ms == 2.0  # within the lead: the median, the larger sample
    assert timing(0.0502, host=0.054, device=0.0499).cost_ms == 0.054  # a tiny kernel: the host's time
    compiled = timing(0.2353, host=0.1506, device=0.1823)  # level 1's 88: the median holds 53 us of host time
    ours = timing(0.1845, host=0.0917, device=0.1823)
    assert (compiled.cost_ms, ours.cost_ms) == (0.1823, 0.1823)  # a tie, as the device's times say
    assert timing(0.1403, host=0.1526, device=0.0497).cost_ms == 0.1526  # level 1's 12's torch.compile: the host
    assert Timing(0.5, 0.02, 0.01, 40, 0.49, "cpu_perf_counter").cost_ms == 0.5  # not measured: the median
    before_lead = timing(0.1403, host=0.1526, device=0.0497, lead=None)  # a record from before the lead was kept
    assert before_lead.cost_ms == 0.1526 and timing(0.2353, 0.1506, 0.1823, None).cost_ms == 0.2353
    light, heavy = timing(0.05, host=0.054, device=0.0499), timing(0.1403, host=0.1526, device=0.0497)
    r = Result("p", "c", "triton", Status.OK, True, runtime=light, compiled=heavy)
    assert (r.runtime_ms, r.compile_ms) == (0.054, 0.1526) and r.spread() == (0.054, 0.001)
    assert r.to_dict()["runtime_ms"] == 0.054 and Result.from_dict(r.to_dict()).runtime == light
    assert light.faster_than(heavy) and not heavy.faster_than(light)
    assert not ours.faster_than(compiled)  # by medians 0.051 ms faster; by cost, not at all
