"""Whole models: capture a model's forward, cut it into regions, write each region as a standalone problem,
profile how the model's time splits among them, optimize the regions and verify the model with its faster regions
replaced (engine.py); `kernelcraft.apply(model, DIR)` swaps an apply's kernels into a live model (swap.py).

The package is callable: `kernelcraft.apply(model, DIR)` is `kernelcraft.apply.swap(model, DIR)` (torch.compile(model)
where the apply found that faster than its kernels), so the helper
and the package that makes what it loads share one name."""

import sys
import types

from kernelcraft.apply.capture import Captured, CaptureError, capture
from kernelcraft.apply.extract import (Extraction, ExtractError, Region, TensorMeta, compose, extract_model,
                                       extract_problem, observe, write_problems)
from kernelcraft.apply.swap import swap

__all__ = ["CaptureError", "Captured", "ExtractError", "Extraction", "Region", "TensorMeta", "capture", "compose",
           "extract_model", "extract_problem", "observe", "swap", "write_problems"]


class _CallablePackage(types.ModuleType):
    def __call__(self, model, directory, use: str = "final"):
        return swap(model, directory, use)


sys.modules[__name__].__class__ = _CallablePackage
