"""Conv3d(3, 16, kernel_size=3) -> ReLU -> mean over the depth dim, giving (batch, channels, H, W)."""
import torch
import torch.nn as nn

batch_size = 8
in_channels = 3
out_channels = 16
depth = 32
height = 64
width = 64

SMALL_SIZES = {"batch_size": 2, "out_channels": 5, "depth": 9, "height": 17, "width": 13}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)).mean(dim=2)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
