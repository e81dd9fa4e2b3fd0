"""HardTanh activation: y = clamp(x, min_val, max_val)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
dim = 16384
min_val = -1.0
max_val = 1.0

SMALL_SIZES = {"batch_size": 37, "dim": 1000}


class Model(nn.Module):
    def __init__(self, min_val: float, max_val: float):
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardtanh(x, min_val=self.min_val, max_val=self.max_val)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [min_val, max_val]
