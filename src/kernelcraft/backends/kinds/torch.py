"""Plain PyTorch, no custom kernel: judged like any candidate, never reported as a kernel speedup (the static check
rejects it as `no_custom_kernel` where a kernel of its own is asked for)."""

from __future__ import annotations

from kernelcraft.backends.base import Backend


class Torch(Backend):
    name = "torch"
    summary = "plain PyTorch, no custom kernel (judged, never reported as a kernel speedup)"
    devices = ("cuda", "cpu")

    def detect(self, code: str) -> bool:
        return True  # what no other backend claims
