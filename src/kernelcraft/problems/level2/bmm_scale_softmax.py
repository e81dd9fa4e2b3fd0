"""Batched matmul -> scale by 1/sqrt(K) -> Softmax over the last dim (attention scores)."""
import math

import torch
import torch.nn as nn

batch_size = 64
M = 512
K = 128
N = 512

SMALL_SIZES = {"batch_size": 3, "M": 37, "K": 24, "N": 51}


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.bmm(a, b) * self.scale, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, M, K), torch.randn(batch_size, K, N)]


def get_init_inputs():
    return [1.0 / math.sqrt(K)]
