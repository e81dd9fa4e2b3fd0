"""Transposed 2D convolution (2x upsampling): ConvTranspose2d(64, 32, kernel_size=4, stride=2, padding=1)."""
import torch
import torch.nn as nn

batch_size = 16
in_channels = 64
out_channels = 32
height = 64
width = 64

SMALL_SIZES = {"batch_size": 2, "in_channels": 7, "out_channels": 5, "height": 19, "width": 23}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size=4, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
