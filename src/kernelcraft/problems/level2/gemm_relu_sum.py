"""Linear -> ReLU -> sum over the feature dim, giving one value per row."""
import torch
import torch.nn as nn

batch_size = 1024
in_features = 4096
out_features = 4096

SMALL_SIZES = {"batch_size": 37, "in_features": 130, "out_features": 91}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)).sum(dim=1)


def get_inputs():
    # Rows of random magnitude, so the row sums differ by far more than sampling noise.
    return [torch.randn(batch_size, in_features) * torch.rand(batch_size, 1)]


def get_init_inputs():
    return [in_features, out_features]
