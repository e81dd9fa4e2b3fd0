"""SiLU / Swish activation: y = x * sigmoid(x)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
dim = 16384

SMALL_SIZES = {"batch_size": 37, "dim": 1000}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
