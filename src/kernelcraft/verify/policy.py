"""Named tolerance policies: how close is correct, and which precision moves are admitted."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Policy:
    name: str
    fp32: float
    half: float  # fp16 and bf16 outputs
    allow_tf32: bool  # fp32 work on TF32 tensor cores is admitted (its error fits the tolerance)
    summary: str

    def tolerance(self, dtype: torch.dtype) -> float:
        if dtype in (torch.float16, torch.bfloat16):
            return self.half
        return self.fp32

    def to_dict(self) -> dict:
        return {"name": self.name, "fp32": self.fp32, "fp16_bf16": self.half, "allow_tf32": self.allow_tf32}


POLICIES = {
    "strict": Policy("strict", 1e-4, 1e-2, False,
                     "fp32 within 1e-4, fp16/bf16 within 1e-2 of the output's magnitude"),
    "relaxed": Policy("relaxed", 1e-2, 1e-2, True,
                      "1e-2 for every dtype (the setting of the published 2025 kernel results); "
                      "admits TF32 for fp32 work"),
}


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}") from None
