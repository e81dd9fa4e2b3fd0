"""`@helion.kernel` kernels: PyTorch-like tile loops (`helion.language`) that Helion lowers to a Triton kernel at
the first call. Helion's autotuner is not run in the verifier's worker (it takes minutes a kernel, and what it
times is timed in the candidate's process): a kernel runs its own `config=`, else Helion's default config. On the
CPU they run in Helion's interpreter (HELION_INTERPRET=1): the tile loops as PyTorch ops, no Triton kernel, so
kernel attribution is not checked there, as for any candidate on the CPU without Triton launches. Helion refuses
to run beside Triton's interpreter, which a CPU worker has on, so Triton's is off while a Helion candidate is
imported (Helion reads the two when a kernel is decorated): on the CPU a file that mixes Helion and `@triton.jit`
kernels does not run.

The Triton kernel Helion generates lives in a module Helion wrote, not in the candidate's: `launch_modules`
names those of the candidate's own Helion kernels, so their launches count as the candidate's (attribution.py)."""

from __future__ import annotations

import contextlib
import os
import re
import sys

from kernelcraft.backends.base import Backend, code_of

HELION_KERNEL = re.compile(r"@\s*helion\.kernel\b[^\n]*\n(?:[^\n]*\n)*?\s*def\s+([A-Za-z_]\w*)")


class Helion(Backend):
    name = "helion"
    summary = "@helion.kernel tile programs lowered to Triton (on the CPU through HELION_INTERPRET=1)"
    devices = ("cuda", "cpu")
    packages = ("helion", "triton")
    extra = "helion"
    compiler_errors = ("helion.exc.",)

    def detect(self, code: str) -> bool:
        return bool(re.search(r"^\s*(?:import\s+helion\b|from\s+helion\b)", code, re.M))

    def declared_kernels(self, source: str) -> set[str]:
        """A Helion kernel `f` launches as the Triton kernel `_helion_f`."""
        return {f"_helion_{name}" for name in HELION_KERNEL.findall(source)}

    def worker_env(self, device_type: str) -> dict[str, str]:
        return {"HELION_AUTOTUNE_EFFORT": "none"}

    @contextlib.contextmanager
    def importing(self, build_cache, records, source: str = ""):
        # a GPU (Helion lowers its kernels to Triton's), or a candidate in another language
        if os.environ.get("TRITON_INTERPRET") != "1" or not self.detect(code_of(source)):
            yield
            return
        os.environ.pop("TRITON_INTERPRET")
        had = os.environ.get("HELION_INTERPRET")
        os.environ["HELION_INTERPRET"] = "1"
        try:
            yield
        finally:
            os.environ["TRITON_INTERPRET"] = "1"
            if had is None:
                os.environ.pop("HELION_INTERPRET", None)
            else:
                os.environ["HELION_INTERPRET"] = had

    def launch_modules(self, module) -> set[str]:
        kernel_type = getattr(sys.modules.get("helion.runtime.kernel"), "Kernel", None)
        if kernel_type is None:
            return set()
        found = set()
        for value in vars(module).values():
            if isinstance(value, kernel_type) and getattr(value.fn, "__module__", None) == module.__name__:
                for bound in list(getattr(value, "_bound_kernels", {}).values()):
                    run = getattr(bound, "_run", None)
                    if run is not None and getattr(run, "__module__", None):
                        found.add(run.__module__)
        return found
