"""Conv2d 3x3 (no bias) -> BatchNorm2d in inference mode (running stats) -> ReLU."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 64
out_channels = 128
height = 56
width = 56
eps = 1e-5

SMALL_SIZES = {"batch_size": 2, "in_channels": 7, "out_channels": 11, "height": 23, "width": 19}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, eps: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False)
        self.eps = eps
        self.bn_weight = nn.Parameter(1.0 + 0.1 * torch.randn(out_channels))
        self.bn_bias = nn.Parameter(0.1 * torch.randn(out_channels))
        self.register_buffer("running_mean", 0.1 * torch.randn(out_channels))
        self.register_buffer("running_var", 0.5 + torch.rand(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = F.batch_norm(x, self.running_mean, self.running_var, self.bn_weight, self.bn_bias,
                         training=False, eps=self.eps)
        return torch.relu(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, eps]
