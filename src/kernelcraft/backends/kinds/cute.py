"""CuTe DSL kernels (`@cute.kernel`, launched from a `@cute.jit` host function; NVIDIA's `nvidia-cutlass-dsl`): Python
traced to MLIR and compiled to a cubin by `cute.compile`, or at the first call of the `@cute.jit` function. NVIDIA
GPUs only; they compile for one without it (`CUTE_DSL_ARCH`), which is how the CPU tests check the examples.

The compiled kernels launch through the DSL's own runtime, not Triton's or kernelcraft's: each call of a compiled
function (`JitCompiledFunction`, whether called, run by a direct call of the `@cute.jit` function, or through
TVM-FFI) is recorded by the names of the kernels it holds (`kernel_info`: the cubin's names, the profiler's). That
is a bound, not a count: a host function may launch one of its kernels twice or not at all. A kernel counts as the
candidate's where its name also carries a `@cute.kernel` function the source defines (`kernel_cutlass_<name>_…`,
the DSL's default naming). An executor bound by hand (`compiled.to(device)`) and called is not recorded.

Its compiles are timed apart from the calls (backends/jit_compiles.py): the DSL's compile pipeline, from the traced
MLIR to the loaded cubin (`CompilerBackend.compile`), the Python tracing before it not counted. The DSL's file cache
is off in the workers (`CUTE_DSL_DISABLE_FILE_CACHING`): what a candidate's process compiled is never loaded by
another's."""

from __future__ import annotations

import contextlib
import importlib.util
import re
import sys
import threading

from kernelcraft.backends.base import NOT_INSTALLED, Backend
from kernelcraft.backends.jit_compiles import CompileLog

CUTE_KERNEL = re.compile(r"@\s*cute\.kernel\b[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+([A-Za-z_]\w*)")
# The DSL's default kernel name: kernel_<mangling prefix>_<function>_<arguments>_<n>
_MANGLED = re.compile(r"kernel_(?:cutlass_)?(.+)_\d+$")
EXECUTOR = "cutlass.base_dsl.jit_executor"


class Cute(Backend):
    name = "cute"
    summary = "CuTe DSL kernels (@cute.kernel launched from @cute.jit; nvidia-cutlass-dsl; NVIDIA GPUs only)"
    devices = ("cuda",)
    packages = ("cutlass",)
    extra = "cute"
    compiler_errors = ("cutlass.base_dsl.common.DSLUserCode",)
    compiler_packages = ("cutlass",)
    exact_launch_counts = False

    def __init__(self) -> None:
        self.log = CompileLog()

    def detect(self, code: str) -> bool:
        return bool(re.search(r"^\s*(?:import\s+cutlass\b|from\s+cutlass\b)", code, re.M))

    def unavailable(self, device_type: str) -> tuple[str, str] | None:
        found = super().unavailable(device_type)
        if found is None and importlib.util.find_spec("cutlass.cute") is None:
            return NOT_INSTALLED, ("a cute candidate needs the CuTe DSL (cutlass.cute), not installed here "
                                   "(pip install 'kernelcraft[cute]')")
        return found

    def declared_kernels(self, source: str) -> set[str]:
        return set(CUTE_KERNEL.findall(source))

    @contextlib.contextmanager
    def importing(self, build_cache, records, source: str = ""):
        yield
        backend = sys.modules.get("cutlass.base_dsl.compile_backend")
        if backend is not None:  # a candidate that imported the DSL compiles at its first call or cute.compile
            self.log.timed(backend.CompilerBackend, "compile",
                           lambda _, compiled: list(getattr(compiled, "kernel_info", None) or {}))

    def compiles(self, device_index: int | None) -> list[dict]:
        return self.log.drain()

    def carries(self, kernel_name: str, declared: set[str]) -> bool:
        """`kernel_cutlass_softmax_kernel_tensorptrf32gmem…_0` carries `softmax_kernel`: the mangled part starts with
        the function's name, followed by its arguments' or nothing."""
        mangled = _MANGLED.match(kernel_name)
        if mangled is None:
            return False
        rest = mangled.group(1)
        return any(rest == d or rest.startswith(d + "_") for d in declared)

    def worker_env(self, device_type: str) -> dict[str, str]:
        return {"CUTE_DSL_DISABLE_FILE_CACHING": "1"}

    @contextlib.contextmanager
    def recorded_launches(self, counts: dict[str, int]):
        executor = sys.modules.get(EXECUTOR)
        if executor is None:  # never imported: nothing of the DSL's was compiled or ran
            yield counts
            return
        classes, seen = [executor.JitCompiledFunction], []
        while classes:
            cls = classes.pop()
            if cls not in seen:
                seen.append(cls)
                classes.extend(cls.__subclasses__())
        depth = threading.local()

        def counting(original):
            def call(self, *args, **kwargs):
                outer = getattr(depth, "n", 0) == 0  # __call__ runs run_compiled_program: one launch, not two
                depth.n = getattr(depth, "n", 0) + 1
                try:
                    out = original(self, *args, **kwargs)
                finally:
                    depth.n -= 1
                if outer:
                    for name in getattr(self, "kernel_info", None) or {}:
                        counts[name] = counts.get(name, 0) + 1
                return out
            return call

        patched = [(cls, attr, cls.__dict__[attr]) for cls in seen for attr in ("__call__", "run_compiled_program")
                   if attr in cls.__dict__]
        for cls, attr, original in patched:
            setattr(cls, attr, counting(original))
        try:
            yield counts
        finally:
            for cls, attr, original in patched:
                setattr(cls, attr, original)
