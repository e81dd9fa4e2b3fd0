"""Leaky ReLU activation: y = x if x > 0 else negative_slope * x."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
dim = 16384
negative_slope = 0.01

SMALL_SIZES = {"batch_size": 37, "dim": 1000}


class Model(nn.Module):
    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [negative_slope]
