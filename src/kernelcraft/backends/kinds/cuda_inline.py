"""CUDA C++ built with `torch.utils.cpp_extension.load_inline(cuda_sources=…)` at import, as KernelBench writes it;
the build runs ahead in the CPU build pool, through the cache of backends/cuda_inline.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import ContextManager

from kernelcraft.backends.base import Backend
from kernelcraft.backends.kinds.cuda_nvrtc import GLOBAL_KERNEL


class InlineBuild(Backend):
    """A `load_inline` extension: built in the build pool, its build cached by source and target."""

    prebuild = True
    build_is_kernel = True

    def importing(self, build_cache: Path, records: list, source: str = "") -> ContextManager:
        from kernelcraft.backends.cuda_inline import cached_builds

        return cached_builds(build_cache, records)


class CudaInline(InlineBuild):
    name = "cuda_inline"
    summary = "CUDA C++ built with torch.utils.cpp_extension.load_inline(cuda_sources=…)"
    devices = ("cuda",)

    def detect(self, code: str) -> bool:
        return bool(re.search(r"\bload_inline\s*\(", code) and re.search(r"\bcuda_sources\s*=", code))

    def declared_kernels(self, source: str) -> set[str]:
        return set(GLOBAL_KERNEL.findall(source))
