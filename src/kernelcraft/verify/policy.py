"""Named tolerance policies: how close is correct, and which precision moves are admitted."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Policy:
    name: str
    fp32: float
    half: float  # fp16 and bf16 outputs
    allow_tf32: bool  # fp32 work on TF32 tensor cores is admitted (its error fits the tolerance)
    summary: str
    # Against float64, element by element (check.compare_exact): a candidate may be off by the tolerance of the
    # element itself, or by `rounding_factor` times the reference's own rounding at that element (where torch's
    # fp32 is no closer than that: an ill-conditioned element), or by `noise_floor` units of roundoff of the
    # output's rms (an element too small to carry a relative error of its own).
    rounding_factor: float = 10.0
    # The reference's own rounding at an element: the largest error of torch's output and of this many more fp32
    # runs of the reference, each against float64 on inputs perturbed by up to 1% or, every other run, by a few
    # ulps (one error can be near zero by chance, or by where the exact value falls on fp32's grid).
    rounding_samples: int = 8
    noise_floor: float = 256.0
    # Rule "precision": every trial's fp32 outputs are judged against float64 as above, not only those that fail
    # against torch's fp32 output, so reduced-precision math hidden by the inputs' distribution fails.
    precision: bool = False

    def tolerance(self, dtype: torch.dtype) -> float:
        if dtype in (torch.float16, torch.bfloat16):
            return self.half
        return self.fp32

    def to_dict(self) -> dict:
        return {"name": self.name, "fp32": self.fp32, "fp16_bf16": self.half, "allow_tf32": self.allow_tf32,
                "rounding_factor": self.rounding_factor, "rounding_samples": self.rounding_samples,
                "noise_floor_ulps": self.noise_floor,
                "precision_rule": ("every trial's fp32 outputs judged against float64 element by element (within "
                                   "the tolerance of each element, or rounding_factor times the reference's own "
                                   "rounding there)") if self.precision else None,
                "reference_fp32": "torch defaults (cuDNN convolutions in TF32)" if self.allow_tf32
                else "exact (TF32 off for cuDNN and matmuls)"}


POLICIES = {
    "strict": Policy("strict", 1e-4, 1e-2, False,
                     "fp32 within 1e-4, fp16/bf16 within 1e-2 of the output's magnitude; fp32 also within 1e-4 of "
                     "each element against float64, or of the order of torch's own rounding there",
                     precision=True),
    "relaxed": Policy("relaxed", 1e-2, 1e-2, True,
                      "1e-2 for every dtype (the setting of the published 2025 kernel results); "
                      "admits TF32 for fp32 work"),
}


def set_exact_fp32(exact: bool) -> tuple[bool, bool]:
    """Make torch's own fp32 work (the reference, the eager and compiled baselines) exact, or leave torch's
    defaults; returns the previous (cuDNN, matmul) TF32 flags.

    PyTorch runs cuDNN convolutions on TF32 tensor cores by default (about 1e-3 off in fp32), so under a
    policy that does not admit TF32 the reference would fail its own tolerance: there TF32 is turned off for
    cuDNN and matmuls. Under a policy that admits TF32, torch's defaults stand (the eager a user runs)."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    if exact:
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    return saved


@contextmanager
def reference_math(exact_fp32: bool):
    """set_exact_fp32 for the block, the flags restored on exit."""
    saved = set_exact_fp32(exact_fp32)
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}") from None
