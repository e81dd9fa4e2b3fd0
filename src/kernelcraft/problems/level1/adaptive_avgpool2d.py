"""Adaptive 2D average pooling to a fixed 7x7 output: AdaptiveAvgPool2d((7, 7))."""
import torch
import torch.nn as nn

batch_size = 64
channels = 512
height = 28
width = 28
output_size = 7

SMALL_SIZES = {"batch_size": 2, "channels": 13, "height": 23, "width": 19}


class Model(nn.Module):
    def __init__(self, output_size: int):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [output_size]
