"""Batched matrix multiplication: C[b] = A[b] @ B[b] with A (batch, M, K), B (batch, K, N)."""
import torch
import torch.nn as nn

batch_size = 128
M = 256
K = 512
N = 384

SMALL_SIZES = {"batch_size": 3, "M": 37, "K": 51, "N": 29}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(batch_size, M, K), torch.randn(batch_size, K, N)]


def get_init_inputs():
    return []
