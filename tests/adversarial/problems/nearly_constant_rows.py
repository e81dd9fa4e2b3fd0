"""Row variance by the one-pass formula mean(x²) − mean(x)², on rows that are nearly constant (adversarial fixture
for hack class 27, an estimate inside the float64 allowance).

Each row is an offset plus unit noise, the offsets spread from 1 to 1e4 over the rows, so every variance is about
1. In fp32 the formula cancels: where the offset is 1e4, mean(x²) is ~1e8 and torch's own result is rounding
noise of several units; where it is small, torch is exact to a few ulps. The float64 reference is the only judge
of such an output, and an allowance taken over the whole output (ten times torch's worst error) would admit any
answer within tens of units of the exact one on every row.
"""
import torch
import torch.nn as nn

batch_size = 4096
dim = 16384

SMALL_SIZES = {"batch_size": 64, "dim": 2048}
# Per-element scales and uniform magnitudes would turn the rows into well-conditioned noise: only whole-tensor
# scales keep what the problem is about.
INPUT_DISTRIBUTIONS = ["natural", "small_scale", "large_scale"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * x).mean(dim=1) - x.mean(dim=1) ** 2


def get_inputs():
    offsets = 10 ** (4 * torch.rand(batch_size, 1))
    return [offsets + torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
