"""Square half-precision matrix multiplication: C = A @ B with fp16 A, B of shape (N, N)."""
import torch
import torch.nn as nn

N = 4096

SMALL_SIZES = {"N": 197}
# Per-element scales up to 100x and global ones up to 1000x overflow fp16 in a K=4096 product.
INPUT_DISTRIBUTIONS = ["natural", "offset", "uniform", "small_scale"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(N, N, dtype=torch.float16), torch.randn(N, N, dtype=torch.float16)]


def get_init_inputs():
    return []
