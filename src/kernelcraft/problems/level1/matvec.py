"""Matrix-vector multiplication: C (M, 1) = A (M, K) @ B (K, 1)."""
import torch
import torch.nn as nn

M = 4096
K = 16384

SMALL_SIZES = {"M": 257, "K": 1000}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]


def get_init_inputs():
    return []
