"""Pre-LN transformer encoder block: x + MHA(LN(x)), then x + MLP(LN(x)); attention written with matmul + softmax."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
seq_len = 512
d_model = 768
num_heads = 12
mlp_dim = 3072

SMALL_SIZES = {"batch_size": 2, "seq_len": 37, "d_model": 60, "num_heads": 4, "mlp_dim": 130}


class Model(nn.Module):
    def __init__(self, d_model: int, num_heads: int, mlp_dim: int):
        super().__init__()
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, mlp_dim)
        self.fc2 = nn.Linear(mlp_dim, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.num_heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d // h)
        attn = torch.matmul(torch.softmax(scores, dim=-1), v)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, num_heads, mlp_dim]
