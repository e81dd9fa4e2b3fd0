"""`@triton.jit` kernels, compiled at their first launch; on a CPU they run in Triton's interpreter
(TRITON_INTERPRET=1), made to work on every Triton release by backends/triton_interpreter.py. A look at their
builds for a Hopper GPU without one: backends/triton_static.py."""

from __future__ import annotations

import contextlib
import re
import sys

from kernelcraft.backends.base import Backend
from kernelcraft.backends.jit_compiles import CompileLog, listen_to_triton

JIT_KERNEL = re.compile(r"@\s*triton\.jit[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+([A-Za-z_]\w*)")
_AUTOTUNE = re.compile(r"@\s*triton\.(?:autotune|heuristics)\b")


class Triton(Backend):
    """Its compile log holds every Triton compile of the process: Gluon's and Helion's kernels compile through
    Triton too."""

    name = "triton"
    summary = "@triton.jit kernels (on the CPU through TRITON_INTERPRET=1)"
    devices = ("cuda", "cpu")
    packages = ("triton",)

    def detect(self, code: str) -> bool:
        return bool(re.search(r"@\s*triton\.jit|\bimport\s+triton\b|\bfrom\s+triton\b", code))

    def declared_kernels(self, source: str) -> set[str]:
        names = set(JIT_KERNEL.findall(source))
        if _AUTOTUNE.search(source):  # @autotune above @jit: the def follows both decorators
            names |= set(re.findall(r"@\s*triton\.jit[\s\S]*?\bdef\s+([A-Za-z_]\w*)", source))
        return names

    extra = "triton"
    compiler_errors = ("triton.compiler.errors.",)

    def worker_env(self, device_type: str) -> dict[str, str]:
        return {"TRITON_INTERPRET": "1"} if device_type == "cpu" else {}

    def __init__(self) -> None:
        self.log = CompileLog()

    @contextlib.contextmanager
    def importing(self, build_cache, records, source: str = ""):
        yield
        if "triton" in sys.modules:  # its kernels compile at their first launch: listen from now on
            listen_to_triton(self.log)

    def compiles(self, device_index: int | None) -> list[dict]:
        return self.log.drain()

    def prepare_process(self) -> None:
        from kernelcraft.backends.triton_interpreter import make_ready

        make_ready()  # on a CPU: Triton's interpreter runs the kernels on every Triton release
