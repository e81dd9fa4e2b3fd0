"""RMS normalization over the last dim: y = x * rsqrt(mean(x^2, dim=-1) + eps) * weight."""
import torch
import torch.nn as nn

batch_size = 16
seq_len = 1024
hidden_size = 4096
eps = 1e-6

SMALL_SIZES = {"batch_size": 2, "seq_len": 37, "hidden_size": 130}


class Model(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden_size)]


def get_init_inputs():
    return [hidden_size, eps]
