"""Rectangular matrix multiplication: C (M, N) = A (M, K) @ B (K, N)."""
import torch
import torch.nn as nn

M = 2048
K = 8192
N = 4096

SMALL_SIZES = {"M": 67, "K": 130, "N": 91}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
