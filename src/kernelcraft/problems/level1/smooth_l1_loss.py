"""Smooth L1 (Huber-style) loss with beta=1.0, mean reduction."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
dim = 4096
beta = 1.0

SMALL_SIZES = {"batch_size": 37, "dim": 1000}


class Model(nn.Module):
    def __init__(self, beta: float):
        super().__init__()
        self.beta = beta

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.smooth_l1_loss(predictions, targets, beta=self.beta)


def get_inputs():
    # Random per-draw scales, so the (mean) loss is not nearly the same for every draw.
    scale = 2 * torch.rand(2)
    return [torch.randn(batch_size, dim) * scale[0], torch.randn(batch_size, dim) * scale[1]]


def get_init_inputs():
    return [beta]
