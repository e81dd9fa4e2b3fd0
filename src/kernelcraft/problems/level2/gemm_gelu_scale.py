"""Linear -> GELU -> multiply by a constant scale factor."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 1024
in_features = 4096
out_features = 8192
scale_factor = 2.0

SMALL_SIZES = {"batch_size": 37, "in_features": 130, "out_features": 91}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale_factor: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale_factor = scale_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x)) * self.scale_factor


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale_factor]
