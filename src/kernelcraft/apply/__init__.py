"""Whole models: capture a model's forward, cut it into regions, write each region as a standalone problem, and
profile how the model's time splits among them. Optimizing the regions and reassembling the model come next."""

from kernelcraft.apply.capture import Captured, CaptureError, capture
from kernelcraft.apply.extract import (Extraction, ExtractError, Region, TensorMeta, compose, extract_model,
                                       extract_problem, observe, write_problems)

__all__ = ["CaptureError", "Captured", "ExtractError", "Extraction", "Region", "TensorMeta", "capture", "compose",
           "extract_model", "extract_problem", "observe", "write_problems"]
