"""SqueezeNet's fire module: a 1x1 squeeze conv with ReLU, then 1x1 and 3x3 expand convs with ReLU, concatenated
along the channels (SqueezeNet 1.1's fire4 sizes)."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 128
squeeze_channels = 32
expand_channels = 128
height = 56
width = 56

SMALL_SIZES = {"batch_size": 2, "in_channels": 9, "squeeze_channels": 5, "expand_channels": 6, "height": 11,
               "width": 7}


class Model(nn.Module):
    def __init__(self, in_channels: int, squeeze_channels: int, expand_channels: int):
        super().__init__()
        self.squeeze = nn.Conv2d(in_channels, squeeze_channels, kernel_size=1)
        self.expand1x1 = nn.Conv2d(squeeze_channels, expand_channels, kernel_size=1)
        self.expand3x3 = nn.Conv2d(squeeze_channels, expand_channels, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.squeeze(x))
        return torch.cat([torch.relu(self.expand1x1(x)), torch.relu(self.expand3x3(x))], dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, squeeze_channels, expand_channels]
