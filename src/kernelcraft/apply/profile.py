"""Where a model's time goes, by region: the whole model and each region's standalone forward (the very module its
problem file holds), timed interleaved by the verifier's timing loop on the given device, each region on the tensors
it received when the model ran, with the device's timing lock held as the verifier's timing phases hold it. A
region's share is its time over the model's; the shares need not sum to one (a region alone misses the
neighbours' cache and pays its own launch), and the sum is reported beside them.

torch.profiler runs the model once as well, for the ATen ops that took the most time on the device (or the CPU):
a cross-check of which ops dominate, not the attribution itself.

Measured as the verifier measures, so that the shares and the end-to-end times agree: each call's cost
(`Timing.cost_ms`: the host's time or the device's, whichever is longer), and on a CPU the verifier's worker's
thread count (`threads`, VerifyConfig.cpu_threads: one). Timed on every core, a model's profile on a 2-core CPU
was 13.3 ms against the verifier's 22.0 ms, and a thread pool's wake-ups moved a norm region between 15 ms and
0.012 ms from one profile to the next.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from kernelcraft.apply.extract import Extraction, observe
from kernelcraft.verify.devicelock import DeviceLock, device_key
from kernelcraft.verify.timing import TimingConfig, time_interleaved

_MODEL = "__model__"
TOP_OPS = 8


@dataclass
class RegionTime:
    name: str
    kind: str
    ms: float  # median of its standalone forward
    share: float  # ms over the model's median


@dataclass
class Profile:
    device: str
    method: str  # the timing method ("cuda_events+l2_flush", "cpu_perf_counter")
    model_ms: float
    regions: list[RegionTime]
    covered: float  # the regions' times summed, over the model's
    top_ops: list[tuple[str, float]] = field(default_factory=list)  # torch.profiler: (ATen op, self ms), largest first

    @property
    def shares(self) -> dict[str, float]:
        return {r.name: r.share for r in self.regions}

    @classmethod
    def from_dict(cls, d: dict) -> "Profile":
        """A profile as ApplyOutcome.to_dict stored it."""
        return cls(d["device"], d["method"], d["model_ms"], [RegionTime(**r) for r in d["regions"]], d["covered"],
                   [tuple(op) for op in d.get("top_ops") or []])


def profile(extraction: Extraction, model: nn.Module, inputs: list, device: str | torch.device = "cpu",
            config: TimingConfig | None = None, threads: int | None = None) -> Profile:
    """Time `model` and each region of `extraction` (made from this model) on `device` (a CPU: with `threads`
    intra-op threads, where given, as the verifier's worker runs)."""
    device = torch.device(device)
    config = config or TimingConfig()
    model = model.to(device).eval()
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    # the device to itself while timing, as the verifier's timing phases have it (other evaluations wait)
    with DeviceLock(device_key(device)).held(), torch.no_grad(), \
            _threads(threads if device.type == "cpu" else None):
        values = observe(extraction.graph_module.to(device), inputs)
        calls = {_MODEL: (model, inputs)}
        for region in extraction.regions:
            calls[region.name] = (region.module.to(device), [values[n] for n in region.inputs])
        # every callable gets the same arguments from the timing loop: the bundle of all their inputs
        fns = {name: (lambda bundle, name=name: calls[name][0](*bundle[name])) for name in calls}
        bundle = {name: args for name, (_, args) in calls.items()}
        run = time_interleaved(fns, lambda _round: [bundle], device, config)
        top = _top_ops(model, inputs, device)
    model_ms = run.timings[_MODEL].cost_ms
    regions = [RegionTime(r.name, r.kind, run.timings[r.name].cost_ms,
                          run.timings[r.name].cost_ms / model_ms if model_ms else 0.0) for r in extraction.regions]
    return Profile(str(device), run.timings[_MODEL].method, model_ms, regions,
                   sum(r.ms for r in regions) / model_ms if model_ms else 0.0, top)


@contextlib.contextmanager
def _threads(count: int | None):
    """torch's intra-op threads set to `count` for the block (None: as they are)."""
    if count is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _top_ops(model: nn.Module, inputs: list, device: torch.device) -> list[tuple[str, float]]:
    """The ATen ops with the most self time in one profiled call of the model, in ms."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    model(*inputs)  # warm: the first call's allocations are not the model's time
    with torch.profiler.profile(activities=activities) as prof:
        model(*inputs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    attr = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    events = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    events.sort(key=lambda e: getattr(e, attr), reverse=True)
    return [(e.key, getattr(e, attr) / 1e3) for e in events[:TOP_OPS] if getattr(e, attr) > 0]
