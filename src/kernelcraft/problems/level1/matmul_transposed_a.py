"""Matrix multiplication with a transposed left operand: C (M, N) = A.T @ B, A of shape (K, M)."""
import torch
import torch.nn as nn

M = 2048
K = 4096
N = 2048

SMALL_SIZES = {"M": 67, "K": 130, "N": 91}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.T, B)


def get_inputs():
    return [torch.randn(K, M), torch.randn(K, N)]


def get_init_inputs():
    return []
