"""Max reduction over dim=1, returning the values: (B, D1, D2) -> (B, D2)."""
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
        return torch.max(x, dim=self.dim).values


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
