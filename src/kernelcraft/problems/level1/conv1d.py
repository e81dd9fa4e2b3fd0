"""1D convolution: Conv1d(in_channels, out_channels, kernel_size=3) over long sequences."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 128
kernel_size = 3
length = 16384

SMALL_SIZES = {"batch_size": 3, "in_channels": 13, "out_channels": 24, "length": 1000}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
