"""RMSNorm (x * rsqrt(mean(x^2) + eps) * weight) -> Linear without bias, as in an LLM projection."""
import torch
import torch.nn as nn

batch_size = 8
seq_len = 1024
hidden_size = 4096
out_features = 4096
eps = 1e-6

SMALL_SIZES = {"batch_size": 2, "seq_len": 37, "hidden_size": 130, "out_features": 91}


class Model(nn.Module):
    def __init__(self, hidden_size: int, out_features: int, eps: float):
        super().__init__()
        self.eps = eps
        self.norm_weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))
        self.proj = nn.Linear(hidden_size, out_features, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.norm_weight
        return self.proj(x)


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden_size)]


def get_init_inputs():
    return [hidden_size, out_features, eps]
