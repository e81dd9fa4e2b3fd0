"""Square half-precision matrix multiplication: C = A @ B with fp16 A, B of shape (N, N)."""
import torch
import torch.nn as nn

N = 4096

SMALL_SIZES = {"N": 197}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(N, N, dtype=torch.float16), torch.randn(N, N, dtype=torch.float16)]


def get_init_inputs():
    return []
