"""Transposed 3D convolution (2x volume upsampling): ConvTranspose3d(32, 16, kernel_size=3, stride=2, padding=1,
output_padding=1)."""
import torch
import torch.nn as nn

batch_size = 8
in_channels = 32
out_channels = 16
depth = 16
height = 32
width = 32

SMALL_SIZES = {"batch_size": 2, "in_channels": 5, "out_channels": 6, "depth": 4, "height": 5, "width": 7}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.ConvTranspose3d(in_channels, out_channels, kernel_size=3, stride=2, padding=1,
                                       output_padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
