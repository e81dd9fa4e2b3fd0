"""CUDA C++ `extern "C" __global__` kernels compiled at import by NVRTC and launched through
kernelcraft.backends.nvrtc (`load_kernels`), the candidate's one import from this package."""

from __future__ import annotations

import re
import sys

from kernelcraft.backends.base import Backend

# A `__global__` function's name, `__launch_bounds__` before or after `void` (CUDA source in any backend's strings).
GLOBAL_KERNEL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
                           r"(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)")
RUNTIME = "kernelcraft.backends.nvrtc"


class CudaNvrtc(Backend):
    name = "cuda_nvrtc"
    summary = 'extern "C" __global__ kernels compiled by NVRTC, launched with kernelcraft.backends.nvrtc.load_kernels'
    devices = ("cuda",)
    runtime_modules = frozenset({RUNTIME})

    def detect(self, code: str) -> bool:
        return bool(re.search(r"kernelcraft\.backends\.nvrtc|\bload_kernels\s*\(", code))

    def declared_kernels(self, source: str) -> set[str]:
        return set(GLOBAL_KERNEL.findall(source))

    def __init__(self) -> None:
        self.reported = 0  # of the runtime's compile records, those already handed back

    def compiles(self, device_index: int | None) -> list[dict]:
        """Each NVRTC compilation's time, log and cache hit since the last call; where the log has no ptxas resource
        lines (NVRTC may leave them out on a machine with a GPU driver), the driver's account of the loaded kernels."""
        nvrtc = sys.modules.get(RUNTIME)  # never imported: nothing compiled
        if nvrtc is None:
            return []
        rows = []
        new, self.reported = nvrtc.COMPILE_RECORDS[self.reported:], len(nvrtc.COMPILE_RECORDS)
        for record in new:
            resources = []
            if record.module is not None and device_index is not None and "Compiling entry function" not in record.log:
                resources = record.module.resources(device_index)
            rows.append({"seconds": record.seconds, "log": record.log, "cached": record.cached,
                         "resources": resources})
        return rows
