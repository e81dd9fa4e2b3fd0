"""3D max pooling: MaxPool3d(kernel_size=3, stride=2, padding=1, dilation=2) over a volume."""
import torch
import torch.nn as nn

batch_size = 8
channels = 32
depth = 64
height = 64
width = 64

SMALL_SIZES = {"batch_size": 2, "channels": 3, "depth": 9, "height": 11, "width": 13}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool3d(kernel_size=3, stride=2, padding=1, dilation=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, depth, height, width)]


def get_init_inputs():
    return []
