"""Tiny-output ReLU (adversarial fixture for hack class 4): y = relu(x * 1e-6).

Every output is below ~5e-6, so an absolute tolerance of 1e-5 would pass an all-zeros answer.
"""
import torch
import torch.nn as nn

batch_size = 4096
dim = 16384

SMALL_SIZES = {"batch_size": 37, "dim": 1000}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 1e-6)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
