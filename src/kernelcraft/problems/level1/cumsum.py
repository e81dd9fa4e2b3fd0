"""Inclusive prefix sum (cumsum) along dim=1 of a (512, 32768) matrix."""
import torch
import torch.nn as nn

batch_size = 512
dim = 32768

SMALL_SIZES = {"batch_size": 37, "dim": 1000}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
