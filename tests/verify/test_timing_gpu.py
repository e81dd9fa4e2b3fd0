"""The verifier's clock on a GPU: each call's host time measured beside its CUDA events; a call whose host time
outlasts the L2 flush queued before it (the host's lead) has the host's time in its event time, and the device's
own time, measured with the call's work queued ahead, has not. Skipped without a CUDA device (the `gpu` marker)."""

from __future__ import annotations

import time

import pytest
import torch

from kernelcraft.verify.timing import TimingConfig, time_interleaved

pytestmark = pytest.mark.gpu


def test_host_time_beyond_the_flush_is_in_the_events_and_not_in_the_device_time():
    x = torch.randn(1024, device="cuda")

    def light(t):
        return t * 2

    def heavy(t):  # 2 ms of host work before one small launch: 20 times the flush's device time
        time.sleep(0.002)
        return t * 2

    config = TimingConfig(warmup_ms=20, min_samples=10, budget_s=1.0, batch_ms=10)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    run = time_interleaved({"light": light, "heavy": heavy}, lambda r: [x], torch.device("cuda"), config, l2)
    assert 0.005 < run.lead_ms < 2.0  # a 256 MiB write: tens to hundreds of microseconds
    heavy_t, light_t = run.timings["heavy"], run.timings["light"]
    assert heavy_t.host_ms >= 2.0 and heavy_t.median_ms >= 2.0 - run.lead_ms - 0.1  # the idle device: the host's
    assert heavy_t.device_ms < 0.5  # the same calls' work queued ahead: a small multiply's time
    assert light_t.host_ms < 2.0 and light_t.median_ms < 0.5 and light_t.device_ms < 0.5
    assert heavy_t.lead_ms == light_t.lead_ms == run.lead_ms
    assert heavy_t.cost_ms == heavy_t.host_ms  # a loop of such calls runs at its host's pace


def test_a_call_past_the_lead_costs_its_device_time_not_its_median():
    """Calls in a batch whose harness work between them (here a slow change of the inputs) leaves the device idle
    before each: a call whose host time outlasts the flush's lead then has the host's time past the lead in its
    median, though its device work is longer than its host time. Its cost is the device's time alone, what a loop
    of such calls with nothing between them takes a call."""
    x = torch.randn(1024, device="cuda")

    def late(t):  # 0.3 ms of host work (0.33-0.45 with time.sleep's overshoot), then about 1 ms on the device
        time.sleep(0.0003)
        torch.cuda._sleep(2_000_000)
        return t * 2

    def slow_change(inputs, seed):  # 2 ms on the host before each call, outside its timed window: the device idles
        time.sleep(0.002)

    config = TimingConfig(warmup_ms=20, min_samples=10, budget_s=1.0, batch_ms=10)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    run = time_interleaved({"late": late}, lambda r: [x], torch.device("cuda"), config, l2, mutate=slow_change)
    t = run.timings["late"]
    assert t.lead_ms < t.host_ms < t.device_ms
    assert t.median_ms > t.device_ms + 0.5 * (t.host_ms - t.lead_ms)  # the device idle before the sleep's launch
    assert t.cost_ms == t.device_ms
