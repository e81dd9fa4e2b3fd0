"""2D convolution as in a ResNet stage: Conv2d(128, 128, kernel_size=3, stride=1, padding=1, bias=False) on 56x56."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 128
out_channels = 128
height = 56
width = 56

SMALL_SIZES = {"batch_size": 2, "in_channels": 19, "out_channels": 24, "height": 23, "width": 29}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=1, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
