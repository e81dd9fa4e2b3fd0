"""ResNet basic block with a strided 1x1 downsample shortcut; batch norms in inference mode."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 64
out_channels = 128
stride = 2
height = 56
width = 56

SMALL_SIZES = {"batch_size": 2, "in_channels": 7, "out_channels": 12, "height": 23, "width": 19}


class FrozenBatchNorm2d(nn.Module):
    """BatchNorm2d in inference mode, with non-trivial running statistics and affine parameters."""

    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(num_features))
        self.bias = nn.Parameter(0.1 * torch.randn(num_features))
        self.register_buffer("running_mean", 0.1 * torch.randn(num_features))
        self.register_buffer("running_var", 0.5 + torch.rand(num_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            training=False, eps=self.eps)


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = FrozenBatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, stride=1, padding=1, bias=False)
        self.bn2 = FrozenBatchNorm2d(out_channels)
        self.downsample = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
            FrozenBatchNorm2d(out_channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.downsample(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, stride]
