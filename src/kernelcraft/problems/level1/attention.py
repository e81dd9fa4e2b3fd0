"""Non-causal scaled dot-product attention in fp32, written as matmul -> softmax -> matmul."""
import math

import torch
import torch.nn as nn

batch_size = 8
num_heads = 16
seq_len = 512
head_dim = 64

SMALL_SIZES = {"batch_size": 2, "num_heads": 3, "seq_len": 37, "head_dim": 24}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def get_inputs():
    shape = (batch_size, num_heads, seq_len, head_dim)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
