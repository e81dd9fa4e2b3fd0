"""Lower triangle of a batch of matrices below the main diagonal (torch.tril with a diagonal held by the module)."""
import torch
import torch.nn as nn

batch_size = 16
rows = 4096
cols = 4096

SMALL_SIZES = {"batch_size": 3, "rows": 67, "cols": 45}


class Model(nn.Module):
    def __init__(self, diagonal: int = -1):
        super().__init__()
        self.diagonal = diagonal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tril(x, self.diagonal)


def get_inputs():
    return [torch.randn(batch_size, rows, cols)]


def get_init_inputs():
    return [-1]
