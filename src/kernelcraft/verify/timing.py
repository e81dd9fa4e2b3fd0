"""Timing of callables, interleaved, in the process that runs them.

On a GPU: CUDA events around each call, the L2 flushed (a write of at least twice its size) before
each, a time-based warm-up, then rounds; each round draws fresh input values and times a batch of
every callable in turn (order rotated), until the standard error of each mean is within
`target_rse` of it or the time budget is spent. A host wall clock with a device-wide sync is kept
beside the events for a cross-check. On the CPU: `time.perf_counter` around each call, said so in
`method`.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

from kernelcraft.verify.result import Timing


@dataclass
class TimingConfig:
    warmup_ms: float = 50.0
    min_samples: int = 20
    max_samples: int = 2000
    target_rse: float = 0.003  # standard error of the mean over the mean
    budget_s: float = 6.0  # for all callables together, after warm-up
    batch_ms: float = 25.0  # aim per callable per round


@dataclass
class TimedRun:
    timings: dict[str, Timing]
    last_outputs: dict[str, object]  # each callable's output in the final round
    last_round: int  # the round whose inputs produced last_outputs
    wall_ms: float  # host clock over all timed rounds, device-synchronised
    event_ms: float  # sum of the event times over the same rounds


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
                     config: TimingConfig, l2_bytes: int = 0) -> TimedRun:
    """Time every callable on the inputs of successive rounds; see the module's docstring."""
    cuda = device.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    reset_l2 = _persisting_l2_reset() if cuda else (lambda: None)
    flush = torch.empty(max(2 * l2_bytes, 256 << 20) // 4, dtype=torch.float32, device=device) if cuda else None
    method = "cuda_events+l2_flush" if cuda else "cpu_perf_counter"

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

    samples: dict[str, list[float]] = {name: [] for name in fns}
    last: dict[str, object] = {}
    names = list(fns)
    wall_ms = event_ms = 0.0
    deadline = time.perf_counter() + config.budget_s
    round_index = 0
    while True:
        round_index += 1
        inputs = make_inputs(round_index)
        sync()
        wall_start = time.perf_counter()
        order = names[round_index % len(names):] + names[:round_index % len(names)]
        pending = []
        for name in order:
            fn = fns[name]
            for _ in range(batch[name]):
                if cuda:
                    reset_l2()
                    flush.zero_()
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    out = fn(*inputs)
                    end.record()
                    pending.append((name, start, end))
                else:
                    t0 = time.perf_counter()
                    out = fn(*inputs)
                    samples[name].append((time.perf_counter() - t0) * 1e3)
                    event_ms += samples[name][-1]
            last[name] = out
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
    return TimedRun({n: _stats(s, method) for n, s in samples.items()}, last, round_index, wall_ms, event_ms)


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
