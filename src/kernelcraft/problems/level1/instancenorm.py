"""Instance normalization: InstanceNorm2d (per-sample, per-channel over H x W, no affine)."""
import torch
import torch.nn as nn

batch_size = 32
num_features = 64
height = 128
width = 128

SMALL_SIZES = {"batch_size": 2, "num_features": 5, "height": 17, "width": 19}


class Model(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.norm = nn.InstanceNorm2d(num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, num_features, height, width)]


def get_init_inputs():
    return [num_features]
