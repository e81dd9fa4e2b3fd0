"""Conv2d(3, 96, kernel_size=11, stride=4, padding=2) -> ReLU -> MaxPool2d(kernel_size=3, stride=2)."""
import torch
import torch.nn as nn

batch_size = 100
in_channels = 3
out_channels = 96
kernel_size = 11
stride = 4
padding = 2
height = 224
width = 224

SMALL_SIZES = {"batch_size": 2, "height": 67, "width": 67}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(torch.relu(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
