"""Kernel attribution: which GPU kernels a call ran, which are the candidate's own, on which streams
(on the CPU: which Triton launches completed, and their share of the call's time).

The worker profiles one call of the candidate with torch.profiler (CUPTI). A kernel is the
candidate's own when its name carries the name of a kernel the candidate's source declares
(`__global__` functions, `@triton.jit` functions) as a whole identifier, or, for a name of one or
two characters (which would turn up inside library names), as the kernel's function name itself; every
other kernel (ATen, cuBLAS, cuDNN, CUTLASS,
torch.compile's Triton kernels, copies and fills) counts as a library kernel.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

_CUDA_KERNEL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
                          r"(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)")
_TRITON_KERNEL = re.compile(r"@\s*triton\.jit[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+([A-Za-z_]\w*)")
_TRITON_AUTOTUNE = re.compile(r"@\s*triton\.(?:autotune|heuristics)\b")


def triton_kernels(source: str) -> set[str]:
    return set(_TRITON_KERNEL.findall(source))


def declared_kernels(source: str) -> set[str]:
    """Names of the kernels a candidate's source defines (CUDA `__global__` and Triton JIT)."""
    names = set(_CUDA_KERNEL.findall(source)) | set(_TRITON_KERNEL.findall(source))
    if _TRITON_AUTOTUNE.search(source):  # @autotune above @jit: the def follows both decorators
        names |= set(re.findall(r"@\s*triton\.jit[\s\S]*?\bdef\s+([A-Za-z_]\w*)", source))
    return names


@dataclass
class KernelShare:
    name: str
    custom: bool
    calls: int
    device_us: float
    streams: list[int] = field(default_factory=list)


@dataclass
class Attribution:
    kernels: list[KernelShare]
    custom_fraction: float  # of device time, 0..1
    streams: list[int]  # every stream a kernel ran on
    timing_stream: int

    @property
    def custom_ran(self) -> bool:
        return any(k.custom for k in self.kernels)

    @property
    def library_ran(self) -> bool:
        return any(not k.custom for k in self.kernels)

    @property
    def side_streams(self) -> list[int]:
        return [s for s in self.streams if s != self.timing_stream]

    def to_dict(self) -> dict:
        return {"kernels": [asdict(k) for k in self.kernels], "custom_fraction": self.custom_fraction,
                "streams": self.streams, "timing_stream": self.timing_stream}


SHORT_NAME = 2  # declared names this short match only the kernel's own function name
_FUNCTION = re.compile(r"\s*(?:void\s+)?([A-Za-z_]\w*)")  # "k", "void k(float*)", "k<float>(…)", "k_0d1d"


def is_custom(kernel_name: str, declared: set[str]) -> bool:
    """The profiler's name carries a declared name as a whole identifier (Triton may add `_0d1d…`).

    A one- or two-character name (`k`) would match a token inside many a library kernel's name
    (template arguments, parameters), so it must be the kernel's function name: the name itself, or
    the name with a Triton specialisation suffix, unqualified by any namespace."""
    function = _FUNCTION.match(kernel_name)
    function = function.group(1) if function and not kernel_name[function.end():].startswith("::") else ""
    for d in declared:
        if len(d) <= SHORT_NAME:
            if re.fullmatch(rf"{re.escape(d)}(?:_\d\w*)?", function):
                return True
        elif re.search(rf"(?<![A-Za-z0-9_]){re.escape(d)}(?:(?![A-Za-z0-9_])|(?=_\d))", kernel_name):
            return True
    return False


def profile_call(fn, inputs: list, declared: set[str]) -> Attribution:
    """Run `fn(*inputs)` once under the CUDA profiler and attribute its kernels."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof, torch.no_grad():
        torch.cuda._sleep(1)  # a marker on the timing stream: its stream id is the timing stream's
        fn(*inputs)
        torch.cuda.synchronize()
    shares: dict[str, KernelShare] = {}
    streams: set[int] = set()
    timing_stream = -1
    for event in prof.profiler.kineto_results.events():
        if event.device_type() != torch.autograd.DeviceType.CUDA:
            continue
        name = event.name()
        if "spin_kernel" in name and timing_stream < 0:
            timing_stream = int(event.device_resource_id())
            continue
        if name.startswith(("Memcpy", "Memset")) or "ProfilerStep" in name:
            kind = name.split()[0]
            name = f"[{kind}]"
        stream = int(event.device_resource_id())
        streams.add(stream)
        share = shares.setdefault(name, KernelShare(name[:200], is_custom(name, declared), 0, 0.0))
        share.calls += 1
        share.device_us += event.duration_ns() / 1e3
        if stream not in share.streams:
            share.streams.append(stream)
    kernels = sorted(shares.values(), key=lambda k: -k.device_us)
    total = sum(k.device_us for k in kernels)
    custom = sum(k.device_us for k in kernels if k.custom)
    return Attribution(kernels, round(custom / total, 4) if total else 0.0, sorted(streams), timing_stream)


def count_triton_launches(fn, inputs: list, declared: set[str]) -> Attribution:
    """On the CPU (Triton's interpreter): the Triton launches of one call that completed, and their share
    of the call's time.

    The interpreter runs a launch synchronously on the calling thread, so the host time inside a
    completed launch is that kernel's work, and the rest of the call (torch's own CPU ops, Python) is
    not the candidate's kernels. The custom fraction is the time inside completed launches of declared
    kernels over the whole call's time. A launch that raised is not counted at all: a candidate that
    catches it and computes the output with torch ran no kernel of its own (counting launches, that
    read 1.0).
    """
    import time

    from triton.runtime.interpreter import InterpretedFunction

    calls: dict[str, int] = {}
    seconds: dict[str, float] = {}
    original = InterpretedFunction.run

    def run(self, *args, **kwargs):
        name = getattr(getattr(self, "fn", None), "__name__", "triton_kernel")
        start = time.perf_counter()
        out = original(self, *args, **kwargs)  # if this raises, the launch is not counted
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start
        calls[name] = calls.get(name, 0) + 1
        return out

    InterpretedFunction.run = run
    try:
        start = time.perf_counter()
        fn(*inputs)
        whole = time.perf_counter() - start
    finally:
        InterpretedFunction.run = original
    # No device on the CPU: `device_us` holds host microseconds inside the launches, and no streams exist.
    kernels = [KernelShare(name, name in declared, n, round(seconds[name] * 1e6, 3))
               for name, n in sorted(calls.items())]
    custom = sum(seconds[k.name] for k in kernels if k.custom)
    return Attribution(kernels, round(min(custom / whole, 1.0), 4) if whole > 0 else 0.0, [], -1)
