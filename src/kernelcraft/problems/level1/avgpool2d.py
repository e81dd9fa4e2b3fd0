"""2D average pooling: AvgPool2d(kernel_size=3, stride=2, padding=1)."""
import torch
import torch.nn as nn

batch_size = 32
channels = 64
height = 128
width = 128

SMALL_SIZES = {"batch_size": 2, "channels": 5, "height": 37, "width": 29}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
