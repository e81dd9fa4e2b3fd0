"""2D batch normalization in inference mode (running statistics, per-channel affine)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
num_features = 64
height = 112
width = 112
eps = 1e-5

SMALL_SIZES = {"batch_size": 3, "num_features": 5, "height": 19, "width": 23}


class Model(nn.Module):
    def __init__(self, num_features: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(num_features))
        self.bias = nn.Parameter(0.1 * torch.randn(num_features))
        self.register_buffer("running_mean", 0.1 * torch.randn(num_features))
        self.register_buffer("running_var", 0.5 + torch.rand(num_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            training=False, eps=self.eps)


def get_inputs():
    return [torch.randn(batch_size, num_features, height, width)]


def get_init_inputs():
    return [num_features, eps]
