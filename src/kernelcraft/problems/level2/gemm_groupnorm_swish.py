"""Linear -> GroupNorm over the features -> Swish (x * sigmoid(x))."""
import torch
import torch.nn as nn

batch_size = 1024
in_features = 4096
out_features = 4096
num_groups = 32

SMALL_SIZES = {"batch_size": 37, "in_features": 130, "out_features": 90, "num_groups": 6}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, num_groups: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.GroupNorm(num_groups, out_features)
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(out_features))
            self.norm.bias.add_(0.1 * torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.linear(x))
        return x * torch.sigmoid(x)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups]
