"""LayerNorm over the hidden dim -> GELU."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
seq_len = 1024
hidden_size = 4096

SMALL_SIZES = {"batch_size": 2, "seq_len": 37, "hidden_size": 130}


class Model(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size)
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(hidden_size))
            self.norm.bias.add_(0.1 * torch.randn(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.norm(x))


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden_size)]


def get_init_inputs():
    return [hidden_size]
