"""Fully connected layer with bias: y = x @ W.T + b (nn.Linear)."""
import torch
import torch.nn as nn

batch_size = 2048
in_features = 4096
out_features = 4096

SMALL_SIZES = {"batch_size": 37, "in_features": 130, "out_features": 91}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
