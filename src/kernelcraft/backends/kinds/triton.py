"""`@triton.jit` kernels, compiled at their first launch; on a CPU they run in Triton's interpreter
(TRITON_INTERPRET=1), made to work on every Triton release by backends/triton_interpreter.py. A look at their
builds for a Hopper GPU without one: backends/triton_static.py."""

from __future__ import annotations

import re

from kernelcraft.backends.base import Backend

JIT_KERNEL = re.compile(r"@\s*triton\.jit[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+([A-Za-z_]\w*)")
_AUTOTUNE = re.compile(r"@\s*triton\.(?:autotune|heuristics)\b")


class Triton(Backend):
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

    def prepare_process(self) -> None:
        from kernelcraft.backends.triton_interpreter import make_ready

        make_ready()  # on a CPU: Triton's interpreter runs the kernels on every Triton release
