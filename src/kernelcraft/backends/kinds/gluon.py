"""`@gluon.jit` kernels (`triton.experimental.gluon`): Triton's lower-level language, in which a kernel names its
own layouts, shared memory and warps. They compile at their first launch through Triton's JIT (a GluonJITFunction
is a JITFunction, so verify/attribution.py records their launches as Triton's) and run on NVIDIA GPUs only:
Triton's interpreter does not run them, though they compile for a GPU without one (tests/backends/test_gluon.py)."""

from __future__ import annotations

import importlib.util
import re

from kernelcraft.backends.base import NOT_INSTALLED, Backend

GLUON_KERNEL = re.compile(r"@\s*gluon\.jit[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+([A-Za-z_]\w*)")


class Gluon(Backend):
    name = "gluon"
    summary = "@gluon.jit kernels (triton.experimental.gluon, Triton 3.5 or later; NVIDIA GPUs only)"
    devices = ("cuda",)
    packages = ("triton",)
    extra = "triton"
    compiler_errors = ("triton.compiler.errors.",)

    def detect(self, code: str) -> bool:
        return bool(re.search(r"\btriton\.experimental\.gluon\b|\bfrom\s+triton\.experimental\s+import\s+gluon\b|"
                              r"@\s*gluon\.jit", code))

    def unavailable(self, device_type: str) -> tuple[str, str] | None:
        found = super().unavailable(device_type)
        if found is None and importlib.util.find_spec("triton.experimental.gluon") is None:
            return NOT_INSTALLED, ("a gluon candidate needs a Triton with Gluon (3.5 or later; "
                                   "pip install -U 'kernelcraft[triton]')")
        return found

    def declared_kernels(self, source: str) -> set[str]:
        return set(GLUON_KERNEL.findall(source))
