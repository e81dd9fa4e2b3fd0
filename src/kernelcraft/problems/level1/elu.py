"""ELU activation: y = x if x > 0 else alpha * (exp(x) - 1)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
dim = 16384
alpha = 1.0

SMALL_SIZES = {"batch_size": 37, "dim": 1000}


class Model(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(x, alpha=self.alpha)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [alpha]
