"""Three-layer MLP: Linear -> ReLU -> Linear -> ReLU -> Linear."""
import torch
import torch.nn as nn

batch_size = 256
input_size = 1024
hidden_size = 4096
output_size = 1000

SMALL_SIZES = {"batch_size": 5, "input_size": 130, "hidden_size": 197, "output_size": 37}


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(input_size, hidden_size),
            nn.ReLU(),
            nn.Linear(hidden_size, hidden_size),
            nn.ReLU(),
            nn.Linear(hidden_size, output_size),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
