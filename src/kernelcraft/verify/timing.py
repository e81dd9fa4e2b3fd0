"""Timing of callables, interleaved, in the process that runs them.

On a GPU: CUDA events around each call, the L2 flushed (a write of at least twice its size) before
each, a time-based warm-up, then rounds; each round draws fresh input values and times a batch of
every callable in turn (order rotated), until the standard error of each mean is within
`target_rse` of it or the time budget is spent. A host wall clock with a device-wide sync is kept
beside the events for a cross-check. On the CPU: `time.perf_counter` around each call, said so in
`method`.

The flush is also the host's lead: while the device writes it, the host runs the call up to its
launches. A call whose host time before a launch outlasts that lead leaves the device idle inside
the call's events, so its event time holds host time too, and moves with the host's load. Each
call's host time (to its return) is measured beside its events; after the rounds, a few calls of
each callable run with a device sleep of twice that time queued after the flush, so their work
reaches the device queued: each Timing says the median host time and that device-only time
(`host_ms`, `device_ms`), and the flush's device time (`lead_ms`). A call's cost (`Timing.cost_ms`) is the
device's time or the host's, whichever is longer: the median for the device's where the host's time fit in the
lead, else the device-only time.

Before every timed call the inputs change in place (`mutate`, outside the timed region, before the
flush), with a seed drawn at that moment; one call per round of the `sample` callable is chosen at
random, and a few of those (a reservoir over the rounds) keep their output and the seeds that led to
its inputs, for the supervisor to check. Where the `sample` callable's host time outlasts the lead, its
device-only calls give its cost, so one of them, chosen at random, takes a kept sample's place: a call
that could tell a long lead ahead of it (an event recorded at its start, still pending after its host
work) and cut corners there is checked there. Nothing else from the timed calls is kept alive: the harness
holds one round's inputs, one output, the samples and the flush buffer.
"""

from __future__ import annotations

import random
import secrets
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

from kernelcraft.result import Timing


# Calls timed with the host's work queued ahead (`Timing.device_ms`): more where the host outlasted the lead, as the
# device's time a call then comes from them (`Timing.cost_ms`).
DEVICE_CALLS, DEVICE_CALLS_PAST_LEAD = 5, 15


@dataclass
class TimingConfig:
    warmup_ms: float = 50.0
    min_samples: int = 20
    max_samples: int = 2000
    target_rse: float = 0.003  # standard error of the mean over the mean
    budget_s: float = 6.0  # for all callables together, after warm-up
    batch_ms: float = 25.0  # aim per callable per round


@dataclass
class Sample:
    """One timed call's output, and how to rebuild its inputs: the round's, then each change in order."""

    round: int
    mutations: list[int]
    outputs: object
    device_only: bool = False  # from the calls timed with the host's work queued ahead (Timing.device_ms)


@dataclass
class TimedRun:
    timings: dict[str, Timing]
    samples: list[Sample]  # sampled timed calls of the `sample` callable
    rounds: int
    wall_ms: float  # host clock over all timed rounds, device-synchronised
    event_ms: float  # sum of the event times over the same rounds
    mutations: int = 0  # changes made in place between calls
    lead_ms: float = 0.0  # the flush's device time: the host's lead before each timed call (0 on the CPU)
    # per callable: the median of its calls on fully fresh inputs and of the others (`fresh_split`)
    split: dict[str, dict] | None = None


def _stats(samples: list[float], method: str) -> Timing:
    qs = statistics.quantiles(samples, n=4) if len(samples) >= 2 else [samples[0]] * 3
    mean = statistics.fmean(samples)
    sd = statistics.pstdev(samples) if len(samples) > 1 else 0.0
    return Timing(median_ms=statistics.median(samples), iqr_ms=qs[2] - qs[0], cv=sd / mean if mean else 0.0,
                  samples=len(samples), min_ms=min(samples), method=method)


def _rse(samples: list[float]) -> float:
    if len(samples) < 2:
        return float("inf")
    mean = statistics.fmean(samples)
    return statistics.stdev(samples) / len(samples) ** 0.5 / mean if mean else 0.0


def time_interleaved(fns: dict[str, Callable], make_inputs: Callable[[int], list], device: torch.device,
                     config: TimingConfig, l2_bytes: int = 0, mutate: Callable[[list, int], None] | None = None,
                     sample: str | None = None, keep: int = 1) -> TimedRun:
    """Time every callable on the inputs of successive rounds; see the module's docstring."""
    cuda = device.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    reset_l2 = _persisting_l2_reset() if cuda else (lambda: None)
    flush = torch.empty(max(2 * l2_bytes, 256 << 20) // 4, dtype=torch.float32, device=device) if cuda else None
    method = "cuda_events+l2_flush" if cuda else "cpu_perf_counter"
    chooser = random.Random(secrets.randbits(64))  # which calls are sampled: unknown to the callables

    inputs = make_inputs(0)
    per_call: dict[str, float] = {}
    for name, fn in fns.items():  # warm-up, also measuring a call's rough cost
        n, start = 0, time.perf_counter()
        while n < 3 or (time.perf_counter() - start) * 1e3 < config.warmup_ms:
            fn(*inputs)
            sync()
            n += 1
            if n >= 10_000:
                break
        per_call[name] = (time.perf_counter() - start) * 1e3 / n
    batch = {name: max(1, min(100, int(config.batch_ms / max(ms, 1e-3)))) for name, ms in per_call.items()}
    if sample in batch:  # twice at least: an output kept from one call to the next must have its chance to show
        batch[sample] = max(2, batch[sample])

    samples: dict[str, list[float]] = {name: [] for name in fns}
    fresh: dict[str, list[bool]] = {name: [] for name in fns}  # whether each sample's call saw fully fresh inputs
    hosts: dict[str, list[float]] = {name: [] for name in fns}
    lead_ms = _device_ms(flush.zero_) if cuda else 0.0
    kept: list[Sample] = []
    names = list(fns)
    wall_ms = event_ms = 0.0
    mutations = 0
    deadline = time.perf_counter() + config.budget_s
    round_index = 0
    while True:
        round_index += 1
        inputs = None  # the last round's inputs go before this round's are drawn
        inputs = make_inputs(round_index)
        seeds: list[int] = []
        # the sampled call: never a round's first, so a call before it saw the same inputs, changed since
        pick = chooser.randrange(1, batch[sample]) if sample in fns else -1
        sync()
        wall_start = time.perf_counter()
        order = names[round_index % len(names):] + names[:round_index % len(names)]
        pending = []
        for name in order:
            fn = fns[name]
            for call in range(batch[name]):
                if mutate is not None:
                    seeds.append(secrets.randbits(62))
                    fresh[name].append(bool(mutate(inputs, seeds[-1])))
                    mutations += 1
                else:
                    fresh[name].append(False)
                if cuda:
                    reset_l2()
                    flush.zero_()
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    host_start = time.perf_counter()
                    out = fn(*inputs)
                    hosts[name].append((time.perf_counter() - host_start) * 1e3)
                    end.record()
                    pending.append((name, start, end))
                else:
                    t0 = time.perf_counter()
                    out = fn(*inputs)
                    samples[name].append((time.perf_counter() - t0) * 1e3)
                    event_ms += samples[name][-1]
                if name == sample and call == pick:
                    _reservoir(kept, Sample(round_index, list(seeds), _copy(out)), keep, round_index, chooser)
                out = None
        sync()
        wall_ms += (time.perf_counter() - wall_start) * 1e3
        for name, start, end in pending:
            ms = start.elapsed_time(end)
            samples[name].append(ms)
            event_ms += ms
        done = all(len(s) >= config.min_samples and _rse(s) <= config.target_rse for s in samples.values())
        full = any(len(s) >= config.max_samples for s in samples.values())
        if done or full or time.perf_counter() > deadline:
            break
    timings = {n: _stats(s, method) for n, s in samples.items()}
    split = {n: fresh_split(samples[n], fresh[n]) for n in fns} if mutate is not None else None
    if cuda:  # the host's time a call, then the device's own: a few calls with the host's work queued well ahead
        per_ms = 1_000_000 / _device_ms(lambda: torch.cuda._sleep(1_000_000), 3)  # torch.cuda._sleep's cycles
        changed = list(seeds)  # every change made to the last round's inputs so far, in order
        for name, timing in timings.items():
            timing.host_ms, timing.lead_ms = statistics.median(hosts[name]), lead_ms
            past = timing.host_ms > lead_ms  # then these calls give the device's time a call (Timing.cost_ms)
            calls = DEVICE_CALLS_PAST_LEAD if past else DEVICE_CALLS
            checked = chooser.randrange(calls) if past and name == sample else -1
            ahead = []
            for call in range(calls):
                if mutate is not None:
                    changed.append(secrets.randbits(62))
                    mutate(inputs, changed[-1])
                    mutations += 1
                reset_l2()
                flush.zero_()
                torch.cuda._sleep(int(per_ms * (2 * timing.host_ms + 0.05)))  # the lead: twice the host's time
                ms, out = _event_time(lambda: fns[name](*inputs))
                ahead.append(ms)
                if call == checked:  # a call that behaves while timed and not behind a long lead is caught
                    slot = _displace(kept, keep, chooser)
                    kept[slot] = Sample(round_index, list(changed), _copy(out), device_only=True)
                out = None
            timing.device_ms = statistics.median(ahead)
    return TimedRun(timings, kept, round_index, wall_ms, event_ms, mutations, lead_ms, split)


def fresh_split(samples: list[float], fresh: list[bool]) -> dict:
    """The median time of the calls that saw fully fresh inputs and of the others (None where there were none):
    a candidate that corrects an earlier output where only part of an input changed is fast only on the others."""
    on_fresh = [t for t, f in zip(samples, fresh) if f]
    on_partial = [t for t, f in zip(samples, fresh) if not f]
    return {"fresh_ms": statistics.median(on_fresh) if on_fresh else None,
            "partial_ms": statistics.median(on_partial) if on_partial else None,
            "fresh": len(on_fresh), "partial": len(on_partial)}


def _event_time(work: Callable[[], object]) -> tuple[float, object]:
    """The event time of `work` (CUDA events around it, waited for), and what it returned."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = work()
    end.record()
    end.synchronize()
    return start.elapsed_time(end), out


def _device_ms(work: Callable[[], object], repeats: int = 5) -> float:
    """The event time of `work`, the median of `repeats`."""
    return statistics.median(_event_time(work)[0] for _ in range(repeats))


def _copy(out):
    """A sampled output, copied: a candidate may hand back one buffer it overwrites on later calls."""
    if isinstance(out, torch.Tensor):
        return out.clone()
    if isinstance(out, (tuple, list)):
        return [o.clone() if isinstance(o, torch.Tensor) else o for o in out]
    return out


def _reservoir(kept: list, item: Sample, size: int, seen: int, chooser: random.Random) -> None:
    """Keep `size` of the rounds' samples, each round equally likely to be among them."""
    if len(kept) < size:
        kept.append(item)
    else:
        slot = chooser.randrange(seen)
        if slot < size:
            kept[slot] = item


def _displace(kept: list, size: int, chooser: random.Random) -> int:
    """A slot for a sample that must be checked: a free one, else a kept one chosen at random, dropped first (one
    output fewer held while the new one is copied)."""
    if len(kept) < size:
        kept.append(None)
        return len(kept) - 1
    slot = chooser.randrange(size)
    kept[slot] = None
    return slot


def _persisting_l2_reset():
    """A callable that evicts persisting L2 lines and caps the persisting set at zero.

    A candidate that set a persisting access policy would otherwise keep its data in L2 across the
    flush. Without cuda.bindings (a CPU-only install) there is nothing to reset.
    """
    try:
        from cuda.bindings import runtime
    except ImportError:
        return lambda: None
    runtime.cudaDeviceSetLimit(runtime.cudaLimit.cudaLimitPersistingL2CacheSize, 0)
    return lambda: runtime.cudaCtxResetPersistingL2Cache()
