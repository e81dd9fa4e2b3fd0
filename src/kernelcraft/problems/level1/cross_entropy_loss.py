"""Cross-entropy loss (mean) of logits (B, C) against integer class targets (B,)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32768
num_classes = 1000

SMALL_SIZES = {"batch_size": 37, "num_classes": 101}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


def get_inputs():
    # A random per-draw logit scale, so the (mean) loss is not nearly the same for every draw.
    scale = 4 * torch.rand(())
    return [torch.randn(batch_size, num_classes) * scale, torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
