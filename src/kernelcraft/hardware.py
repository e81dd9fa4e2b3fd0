"""What a device can do at best: memory bandwidth and arithmetic rates, for roofline fractions.

Figures are measured ceilings where we have them (a large device-to-device copy, counting bytes read
and written; large matrix products through cuBLAS), else datasheet values; `source` says which.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    bandwidth: float  # bytes/s
    fp32: float  # FLOP/s without tensor cores
    tf32: float
    fp16: float  # dense fp16/bf16 tensor cores
    l2_bytes: int
    source: str


KNOWN = {
    "H200": DeviceSpec("H200", 4.27e12, 51e12, 390e12, 694e12, 60 << 20,
                       "measured on an H200 (copy, cuBLAS fp32/tf32/bf16 4096^3), 2026-11-22"),
    "H100": DeviceSpec("H100", 3.0e12, 51e12, 390e12, 790e12, 50 << 20,
                       "H100 SXM: copy and bf16 measured 2026-11-13; fp32/tf32 taken from the H200"),
    "A100": DeviceSpec("A100", 1.7e12, 19.5e12, 156e12, 312e12, 40 << 20, "datasheet"),
    "L40S": DeviceSpec("L40S", 0.86e12, 91.6e12, 183e12, 362e12, 96 << 20, "datasheet"),
}


def spec_for(device_name: str) -> DeviceSpec | None:
    """The spec whose key appears in a CUDA device name such as 'NVIDIA H200', or None."""
    for key, spec in KNOWN.items():
        if key in device_name.upper():
            return spec
    return None


def roofline_seconds(spec: DeviceSpec, flops: int, nbytes: int, math: str) -> float:
    """The floor: the larger of the arithmetic time at the `math` rate and the memory time."""
    rate = {"fp32": spec.fp32, "tf32": spec.tf32, "fp16": spec.fp16}[math]
    return max(flops / rate, nbytes / spec.bandwidth)


def describe_device(device: str) -> str:
    """A few lines on the device kernels will run on, read from the device itself, for prompts."""
    import os
    import platform

    import torch

    if not device.startswith("cuda"):
        return (f"CPU only ({platform.processor() or platform.machine()}, {os.cpu_count()} cores): there is no GPU. "
                "Kernels run on the CPU and are timed with CPU clocks.")
    props = torch.cuda.get_device_properties(torch.device(device))
    lines = [f"{props.name}: compute capability {props.major}.{props.minor} (sm_{props.major}{props.minor}), "
             f"{props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB memory"]
    smem = getattr(props, "shared_memory_per_block_optin", None)
    if smem:
        lines.append(f"shared memory per block up to {smem // 1024} KiB (opt-in), "
                     f"{getattr(props, 'regs_per_multiprocessor', 65536)} registers per SM")
    spec = spec_for(props.name)
    if spec:
        lines.append(f"memory bandwidth {spec.bandwidth / 1e12:.2f} TB/s, L2 {spec.l2_bytes >> 20} MiB; "
                     f"dense TFLOP/s: fp32 {spec.fp32 / 1e12:.0f}, tf32 {spec.tf32 / 1e12:.0f}, "
                     f"fp16/bf16 {spec.fp16 / 1e12:.0f} ({spec.source})")
    return "\n".join(lines)
