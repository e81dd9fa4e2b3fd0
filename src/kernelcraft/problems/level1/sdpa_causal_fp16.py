"""Causal scaled dot-product attention in fp16: F.scaled_dot_product_attention(q, k, v, is_causal=True)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
num_heads = 32
seq_len = 2048
head_dim = 128

SMALL_SIZES = {"batch_size": 2, "num_heads": 3, "seq_len": 37, "head_dim": 24}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    shape = (batch_size, num_heads, seq_len, head_dim)
    return [torch.randn(shape, dtype=torch.float16) for _ in range(3)]


def get_init_inputs():
    return []
