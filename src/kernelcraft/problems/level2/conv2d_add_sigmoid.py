"""Conv2d 3x3 -> add a learned per-channel bias -> Sigmoid."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 64
height = 64
width = 64

SMALL_SIZES = {"batch_size": 2, "in_channels": 5, "out_channels": 7, "height": 23, "width": 29}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.bias = nn.Parameter(0.5 * torch.randn(out_channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.conv(x) + self.bias)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
