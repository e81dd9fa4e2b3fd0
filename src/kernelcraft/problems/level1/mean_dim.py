"""Mean reduction over a middle dim: (B, D1, D2) -> (B, D2), reducing dim=1."""
import torch
import torch.nn as nn

batch_size = 16
dim1 = 4096
dim2 = 1024
reduce_dim = 1

SMALL_SIZES = {"batch_size": 3, "dim1": 130, "dim2": 37}


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
