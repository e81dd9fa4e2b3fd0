"""Sum reduction over the last dim: (B, D1, D2) -> (B, D1)."""
import torch
import torch.nn as nn

batch_size = 32
dim1 = 4096
dim2 = 512
reduce_dim = -1

SMALL_SIZES = {"batch_size": 3, "dim1": 37, "dim2": 130}


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
