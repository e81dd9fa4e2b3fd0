"""What a device can do at best: memory bandwidth and arithmetic rates, for roofline fractions.

A roofline floor must be a true lower bound on a kernel's time, so the rates here are ceilings: the
vendor's datasheet figures (dense, no sparsity), each spec naming its datasheet in `source`. Rates we
measured (a large copy, cuBLAS at 4096^3) are kept apart in `measured`, for prompts: they are what
good code reaches, not what the device cannot exceed (fp32 at 51 TFLOP/s measured against a 67 TFLOP/s
ceiling made an honest cuBLAS-class matmul read 1.08 of "the roofline").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Measured:
    """Rates reached on the device (None: not measured), and how."""

    bandwidth: float | None  # bytes/s, a large device-to-device copy counting reads and writes
    fp32: float | None
    tf32: float | None
    fp16: float | None
    source: str


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    bandwidth: float  # bytes/s, datasheet peak
    fp32: float  # FLOP/s without tensor cores
    tf32: float  # dense tensor cores
    fp16: float  # dense fp16/bf16 tensor cores
    l2_bytes: int
    source: str  # where the ceilings come from
    measured: Measured | None = None


_HOPPER = "NVIDIA H100/H200 Tensor Core GPU datasheets (dense: half the sparsity figures)"
_H200_MEASURED = Measured(4.27e12, 51e12, 390e12, 694e12,
                          "measured on an H200, 2026-11-22 (copy; cuBLAS fp32, tf32, bf16 4096^3)")
_H100_MEASURED = Measured(3.0e12, None, None, 790e12, "measured on an H100 SXM, 2026-11-13 (copy; cuBLAS bf16)")

# (words that must all appear in the upper-cased device name, spec), most specific first. A name that
# fits several variants gets the first, the largest figures: a ceiling must not be too low.
VARIANTS: list[tuple[tuple[str, ...], DeviceSpec]] = [
    (("H200", "NVL"), DeviceSpec("H200 NVL", 4.8e12, 60e12, 417.5e12, 835.5e12, 50 << 20,
                                 f"H200 NVL: 4.8 TB/s, fp32 60, tf32 417.5, fp16/bf16 835.5 TFLOP/s; {_HOPPER}")),
    (("H200",), DeviceSpec("H200", 4.8e12, 67e12, 494.7e12, 989.4e12, 60 << 20,
                           f"H200 SXM: 4.8 TB/s, fp32 67, tf32 494.7, fp16/bf16 989.4 TFLOP/s; {_HOPPER}",
                           _H200_MEASURED)),
    (("H100", "NVL"), DeviceSpec("H100 NVL", 3.9e12, 60e12, 417.5e12, 835.5e12, 50 << 20,
                                 f"H100 NVL: 3.9 TB/s, fp32 60, tf32 417.5, fp16/bf16 835.5 TFLOP/s; {_HOPPER}")),
    (("H100", "PCIE"), DeviceSpec("H100 PCIe", 2.0e12, 51e12, 378e12, 756e12, 50 << 20,
                                  f"H100 PCIe: 2.0 TB/s, fp32 51, tf32 378, fp16/bf16 756 TFLOP/s; {_HOPPER}")),
    (("H100",), DeviceSpec("H100", 3.35e12, 67e12, 494.7e12, 989.4e12, 50 << 20,
                           f"H100 SXM: 3.35 TB/s, fp32 67, tf32 494.7, fp16/bf16 989.4 TFLOP/s; {_HOPPER}",
                           _H100_MEASURED)),
    (("A100", "40GB"), DeviceSpec("A100 40GB", 1.555e12, 19.5e12, 156e12, 312e12, 40 << 20,
                                  "A100 40GB: 1,555 GB/s, fp32 19.5, tf32 156, fp16/bf16 312 TFLOP/s; "
                                  "NVIDIA A100 Tensor Core GPU datasheet")),
    (("A100",), DeviceSpec("A100", 2.039e12, 19.5e12, 156e12, 312e12, 40 << 20,
                           "A100 80GB SXM: 2,039 GB/s (the 80GB PCIe's 1,935 is below it), fp32 19.5, tf32 156, "
                           "fp16/bf16 312 TFLOP/s; "
                           "NVIDIA A100 Tensor Core GPU datasheet")),
    (("L40S",), DeviceSpec("L40S", 0.864e12, 91.6e12, 183e12, 362.05e12, 96 << 20,
                           "L40S: 864 GB/s, fp32 91.6, tf32 183, fp16/bf16 362.05 TFLOP/s; NVIDIA L40S datasheet")),
]
KNOWN = {spec.name: spec for _, spec in VARIANTS}


def spec_for(device_name: str) -> DeviceSpec | None:
    """The spec of a CUDA device name such as 'NVIDIA H100 80GB HBM3' or 'NVIDIA H100 PCIe', or None."""
    upper = device_name.upper()
    for words, spec in VARIANTS:
        if all(w in upper for w in words):
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
        lines.append(f"peak memory bandwidth {spec.bandwidth / 1e12:.2f} TB/s, L2 {spec.l2_bytes >> 20} MiB; "
                     f"peak dense TFLOP/s: fp32 {spec.fp32 / 1e12:.0f}, tf32 {spec.tf32 / 1e12:.0f}, "
                     f"fp16/bf16 {spec.fp16 / 1e12:.0f} ({spec.source})")
        m = spec.measured
        if m:
            reached = [f"{label} {value / 1e12:.{2 if label == 'copy' else 0}f}" for label, value in
                       (("copy", m.bandwidth), ("fp32", m.fp32), ("tf32", m.tf32), ("fp16/bf16", m.fp16)) if value]
            lines.append(f"reached in practice (TB/s, TFLOP/s): {', '.join(reached)} ({m.source})")
    return "\n".join(lines)
