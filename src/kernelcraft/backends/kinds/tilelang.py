"""TileLang kernels (`tilelang`, `tilelang.language as T`): a `@T.prim_func` (or a `@tilelang.jit` function in
eager mode) of tiles, shared and fragment buffers and `T.Pipelined` loops, which TileLang lowers through TVM to
CUDA C++ and compiles with NVCC when the `@tilelang.jit` function is first called. NVIDIA GPUs only here.

Its kernels launch through TileLang's own adapter, not Triton's or kernelcraft's: each call of a `JITKernel` is
recorded once for each `__global__` function of its generated CUDA source (one launch each: a prim func's
`T.Kernel` blocks are its kernels). The generated kernel of a prim func `main` is `main_kernel`; it counts as the
candidate's where the source defines that prim func (or `@tilelang.jit` function). A kernel's adapter called by hand
(`kernel.torch_function`) is not recorded.

Its compiles are timed apart from the calls (backends/jit_compiles.py): a kernel's lowering, NVCC build and
adapter (`JITKernel._compile_and_create_adapter`). TileLang's kernel cache on disk is off in the workers
(`TILELANG_DISABLE_CACHE`, its directory inside the worker's own): what one candidate's process built is never
loaded by another's."""

from __future__ import annotations

import contextlib
import re
import sys

from kernelcraft.backends.base import Backend
from kernelcraft.backends.jit_compiles import CompileLog
from kernelcraft.backends.kinds.cuda_nvrtc import GLOBAL_KERNEL

# A prim func, or an eager @tilelang.jit function: its kernel is NAME_kernel
PRIM_FUNC = re.compile(r"@\s*(?:\w+\.prim_func|tilelang\.jit)\b[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+([A-Za-z_]\w*)")
KERNEL = "tilelang.jit.kernel"


class TileLang(Backend):
    name = "tilelang"
    summary = "TileLang tile programs (@T.prim_func, @tilelang.jit) lowered through TVM to CUDA; NVIDIA GPUs only"
    devices = ("cuda",)
    packages = ("tilelang",)
    extra = "tilelang"
    compiler_packages = ("tilelang", "tvm_ffi")

    def __init__(self) -> None:
        self.log = CompileLog()

    def detect(self, code: str) -> bool:
        return bool(re.search(r"^\s*(?:import\s+tilelang\b|from\s+tilelang\b)", code, re.M))

    def declared_kernels(self, source: str) -> set[str]:
        return {f"{name}_kernel" for name in PRIM_FUNC.findall(source)}

    @contextlib.contextmanager
    def importing(self, build_cache, records, source: str = ""):
        yield
        module = sys.modules.get(KERNEL)
        if module is not None:  # a candidate that imported TileLang builds its kernels at their first call
            self.log.timed(module.JITKernel, "_compile_and_create_adapter",
                           lambda kernel, _: [f"{kernel.prim_func.attrs['global_symbol']}_kernel"])

    def compiles(self, device_index: int | None) -> list[dict]:
        return self.log.drain()

    def carries(self, kernel_name: str, declared: set[str]) -> bool:
        """`main_kernel`, or a later kernel of the same prim func (`main_kernel_1`)."""
        return any(re.fullmatch(rf"{re.escape(d)}(?:_?\d+)?", kernel_name) for d in declared)

    def worker_env(self, device_type: str) -> dict[str, str]:
        # the cache directory relative: inside the worker's private directory, its cwd (never the user's home)
        return {"TILELANG_DISABLE_CACHE": "1", "TILELANG_AUTO_TUNING_DISABLE_CACHE": "1",
                "TILELANG_CACHE_DIR": "tilelang-cache", "TILELANG_PRINT_ON_COMPILATION": "0"}

    @contextlib.contextmanager
    def recorded_launches(self, counts: dict[str, int]):
        module = sys.modules.get(KERNEL)
        if module is None:  # never imported: no TileLang kernel was built or ran
            yield counts
            return
        kernel_type = module.JITKernel
        original = kernel_type.__dict__["__call__"]
        names: dict[int, list[str]] = {}

        def call(self, *args, **kwargs):
            out = original(self, *args, **kwargs)  # a call that raised launched nothing counted
            if id(self) not in names:
                try:
                    # each once: the source declares a kernel before defining it
                    names[id(self)] = list(dict.fromkeys(GLOBAL_KERNEL.findall(self.get_kernel_source())))
                except Exception:  # no CUDA source (another target): nothing to name
                    names[id(self)] = []
            for name in names[id(self)]:
                counts[name] = counts.get(name, 0) + 1
            return out

        kernel_type.__call__ = call
        try:
            yield counts
        finally:
            kernel_type.__call__ = original
