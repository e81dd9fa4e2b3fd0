"""Matrix multiplication with a small inner dimension: C (M, N) = A (M, K) @ B (K, N), K = 64."""
import torch
import torch.nn as nn

M = 8192
K = 64
N = 8192

SMALL_SIZES = {"M": 197, "K": 29, "N": 131}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
