"""Depthwise 2D convolution: Conv2d(C, C, kernel_size=3, padding=1, groups=C)."""
import torch
import torch.nn as nn

batch_size = 32
channels = 256
height = 56
width = 56

SMALL_SIZES = {"batch_size": 2, "channels": 13, "height": 37, "width": 29}


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
