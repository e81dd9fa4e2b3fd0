"""Interleaved timing on the CPU (time.perf_counter), with callables of known duration."""

from __future__ import annotations

import time

import pytest
import torch

from kernelcraft.result import Timing
from kernelcraft.verify.inputs import mutate_inputs
from kernelcraft.verify.timing import TimingConfig, _rse, _stats, time_interleaved


def _sleeper(ms: float, tag: str):
    def fn(x):
        time.sleep(ms / 1e3)
        return (tag, x)
    return fn


@pytest.fixture(scope="module")
def run_and_rounds():
    rounds: list[int] = []

    def make_inputs(r):
        rounds.append(r)
        return [r]

    config = TimingConfig(warmup_ms=20, min_samples=5, budget_s=1.0, batch_ms=20)
    run = time_interleaved({"fast": _sleeper(2, "fast"), "slow": _sleeper(4, "slow")}, make_inputs,
                           torch.device("cpu"), config)
    return run, rounds


def test_medians_are_ordered_and_about_right(run_and_rounds):
    # A sleep never undershoots; on a busy machine it may overshoot, so the upper bounds are loose.
    run, _ = run_and_rounds
    fast, slow = run.timings["fast"], run.timings["slow"]
    assert 2.0 <= fast.min_ms <= fast.median_ms <= 8.0
    assert 4.0 <= slow.min_ms <= slow.median_ms <= 12.0
    assert slow.median_ms > fast.median_ms + 1.0
    assert slow.min_ms > fast.min_ms + 1.5


def test_timing_records(run_and_rounds):
    run, _ = run_and_rounds
    for name in ("fast", "slow"):
        t = run.timings[name]
        assert isinstance(t, Timing)
        assert t.method == "cpu_perf_counter"
        assert t.samples >= 5
        assert t.min_ms <= t.median_ms and t.iqr_ms >= 0 and t.cv >= 0
        assert t.host_ms is None and t.device_ms is None  # measured beside CUDA events only
    # batches aim at batch_ms per callable per round: a 2 ms call is batched more often than a 4 ms one
    assert run.timings["fast"].samples >= run.timings["slow"].samples


def test_inputs_are_fresh_each_round(run_and_rounds):
    run, rounds = run_and_rounds
    assert run.rounds >= 1
    assert rounds == list(range(run.rounds + 1))  # 0 for the warm-up, then 1, 2, … in order
    assert run.samples == [] and run.mutations == 0  # nothing sampled, nothing changed unless asked
    assert run.lead_ms == 0.0  # no flush on the CPU


def test_a_host_bound_timing_is_noted_and_a_light_one_is_not():
    """speed._host_bound_notes: a note for a timing whose median is well above the device's own time for its calls,
    naming both and the host's; none within the margin, none where it was not measured; the fields survive the JSON
    round trip, and a record from before them reads as not measured."""
    from kernelcraft.result import Result
    from kernelcraft.verify.speed import _host_bound_notes

    def timing(median, host_ms=None, device_ms=None):
        return Timing(median, 0.001, 0.01, 50, median, "cuda_events+l2_flush", host_ms, device_ms)

    result = Result("p", "c", "triton")
    result.runtime = timing(0.1331, 0.131, 0.0504)
    result.eager, result.compiled = timing(0.062, 0.02, 0.0615), timing(0.05)
    _host_bound_notes(result)
    assert result.notes == ["host_bound: the candidate's 0.1331 ms holds host time: its calls took 0.131 ms on the "
                            "host (median), and 0.0504 ms on the device with their work queued ahead"]
    result.notes, result.compiled = [], timing(0.1403, 0.1526, 0.0497)  # the host's time is longer than the median
    result.compiled.lead_ms = result.runtime.lead_ms = 0.088
    _host_bound_notes(result)
    assert result.notes == [
        "host_bound: the candidate's 0.1331 ms holds host time: its calls took 0.131 ms on the host (median), and "
        "0.0504 ms on the device with their work queued ahead; counted: 0.131 ms, the host's",
        "host_bound: torch.compile's 0.1403 ms holds host time: its calls took 0.153 ms on the host (median), and "
        "0.0497 ms on the device with their work queued ahead; counted: 0.1526 ms, the host's"]
    result.notes, result.compiled = [], timing(0.2353, 0.1506, 0.1823)  # past the lead; the device's time counts
    result.compiled.lead_ms = 0.088
    _host_bound_notes(result)
    assert result.notes[1].endswith("queued ahead; counted: 0.1823 ms, the device's")
    assert Timing.from_dict(result.runtime.to_dict()) == result.runtime
    before = {k: v for k, v in result.runtime.to_dict().items() if k not in ("host_ms", "device_ms", "lead_ms")}
    assert Timing.from_dict(before).device_ms is None and Timing.from_dict(before).lead_ms is None


def test_wall_clock_covers_the_samples(run_and_rounds):
    run, _ = run_and_rounds
    floor = sum(t.samples * t.min_ms for t in run.timings.values())
    assert floor <= run.event_ms <= run.wall_ms  # every sample lies inside the wall-clock rounds
    assert run.wall_ms < 3000  # within the 1 s budget, plus one round and the warm-up


def test_budget_bounds_the_run():
    config = TimingConfig(warmup_ms=0, min_samples=10_000, max_samples=100_000, budget_s=0.2, batch_ms=5)
    start = time.perf_counter()
    run = time_interleaved({"a": _sleeper(1, "a")}, lambda r: [r], torch.device("cpu"), config)
    assert time.perf_counter() - start < 1.5
    assert run.timings["a"].samples < 10_000


def test_max_samples_stops_early():
    config = TimingConfig(warmup_ms=0, min_samples=10_000, max_samples=30, budget_s=30, batch_ms=1)
    run = time_interleaved({"a": lambda x: x}, lambda r: [r], torch.device("cpu"), config)
    assert 30 <= run.timings["a"].samples < 200


def _draw(r):
    return [torch.linspace(-1, 1, 4096).reshape(64, 64) + r]


def _replay(sample):
    inputs = _draw(sample.round)
    for seed in sample.mutations:
        mutate_inputs(inputs, seed, "scale")
    return inputs


def _sampled_run(fn, keep=3):
    config = TimingConfig(warmup_ms=0, min_samples=30, budget_s=0.5, batch_ms=1)
    return time_interleaved({"k": fn}, _draw, torch.device("cpu"), config,
                            mutate=lambda xs, s: mutate_inputs(xs, s, "scale"), sample="k", keep=keep)


def test_inputs_change_before_every_call_and_samples_can_be_rebuilt():
    seen = []

    def double(x):
        seen.append(x.clone())
        return x * 2

    run = _sampled_run(double)
    timed = seen[3:]  # after the warm-up's three calls
    assert run.mutations == len(timed) == run.timings["k"].samples
    assert all(not torch.equal(a, b) for a, b in zip(timed, timed[1:]))  # every call saw changed inputs
    assert 1 <= len(run.samples) <= 3
    for sample in run.samples:  # the recorded seeds rebuild each sampled call's inputs exactly
        assert torch.equal(sample.outputs, _replay(sample)[0] * 2)
        assert len(sample.mutations) >= 2  # never a round's first call: one before it saw these inputs


def test_a_memoizing_callable_hands_back_a_stale_sample():
    cache = {}

    def memo(x):  # keyed on what a cheat can see cheaply: the pointer and the shape
        key = (x.data_ptr(), tuple(x.shape))
        if key not in cache:
            cache[key] = x * 2
        return cache[key]

    run = _sampled_run(memo)
    assert run.samples
    for sample in run.samples:
        assert not torch.equal(sample.outputs, _replay(sample)[0] * 2)  # stale


def test_the_sampled_output_is_a_copy():
    buffer = torch.zeros(64, 64)

    def in_one_buffer(x):  # hands back the same tensor every call, overwritten
        return buffer.copy_(x)

    run = _sampled_run(in_one_buffer, keep=1)
    (sample,) = run.samples
    assert torch.equal(sample.outputs, _replay(sample)[0])


def test_stats():
    t = _stats([1.0, 2.0, 3.0, 4.0, 100.0], "m")
    assert (t.median_ms, t.min_ms, t.samples, t.method) == (3.0, 1.0, 5, "m")
    single = _stats([2.5], "m")
    assert (single.median_ms, single.iqr_ms, single.cv) == (2.5, 0.0, 0.0)
    assert _rse([1.0]) == float("inf")
    assert _rse([2.0, 2.0, 2.0]) == 0.0


def test_fresh_split_medians_tell_fresh_calls_from_the_others():
    from kernelcraft.verify.timing import fresh_split

    split = fresh_split([1.0, 5.0, 1.1, 5.2, 0.9, 4.8], [False, True, False, True, False, True])
    assert split == {"fresh_ms": 5.0, "partial_ms": 1.0, "fresh": 3, "partial": 3}
    assert fresh_split([1.0], [False])["fresh_ms"] is None
