"""How a candidate's source becomes something callable: one module per backend, and detection."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernelcraft.backends.errors import CompileError


@dataclass(frozen=True)
class Backend:
    name: str
    # Builds that take seconds (a C++/CUDA toolchain) run in the CPU build pool ahead of the GPU;
    # the others compile at import inside the worker in well under a second.
    prebuild: bool
    devices: tuple[str, ...]
    summary: str


BACKENDS: dict[str, Backend] = {
    "cuda_nvrtc": Backend("cuda_nvrtc", False, ("cuda",),
                          'extern "C" __global__ kernels compiled by NVRTC, launched with '
                          "kernelcraft.backends.nvrtc.load_kernels"),
    "cuda_inline": Backend("cuda_inline", True, ("cuda",),
                           "CUDA C++ built with torch.utils.cpp_extension.load_inline(cuda_sources=…)"),
    "triton": Backend("triton", False, ("cuda", "cpu"),
                      "@triton.jit kernels (on the CPU through TRITON_INTERPRET=1)"),
    "cpp": Backend("cpp", True, ("cpu", "cuda"),
                   "C++ built with torch.utils.cpp_extension.load_inline(cpp_sources=…) — CPU code"),
    "torch": Backend("torch", False, ("cuda", "cpu"),
                     "plain PyTorch, no custom kernel (judged, never reported as a kernel speedup)"),
}


def detect_backend(source: str) -> str:
    """Name of the backend a candidate's source uses, from what it imports and calls."""
    code = re.sub(r"#[^\n]*", "", source)
    if re.search(r"kernelcraft\.backends\.nvrtc|\bload_kernels\s*\(", code):
        return "cuda_nvrtc"
    if re.search(r"@\s*triton\.jit|\bimport\s+triton\b|\bfrom\s+triton\b", code):
        return "triton"
    if re.search(r"\bload_inline\s*\(", code):
        return "cuda_inline" if re.search(r"\bcuda_sources\s*=", code) else "cpp"
    return "torch"


def get_backend(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; choose from {', '.join(BACKENDS)}") from None


__all__ = ["BACKENDS", "Backend", "CompileError", "detect_backend", "get_backend"]
