"""Group normalization: GroupNorm(num_groups=8, num_channels=64) on NCHW input."""
import torch
import torch.nn as nn

batch_size = 32
num_channels = 64
num_groups = 8
height = 128
width = 128

SMALL_SIZES = {"batch_size": 2, "num_channels": 12, "num_groups": 3, "height": 17, "width": 19}


class Model(nn.Module):
    def __init__(self, num_groups: int, num_channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups, num_channels)
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(num_channels))
            self.norm.bias.add_(0.1 * torch.randn(num_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, num_channels, height, width)]


def get_init_inputs():
    return [num_groups, num_channels]
