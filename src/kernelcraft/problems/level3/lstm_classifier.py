"""Sequence classifier: a two-layer bidirectional LSTM over (batch, seq, feature) from zero initial states, then a
linear head over the last time step's output (both directions' hidden states)."""
import torch
import torch.nn as nn

batch_size = 16
seq_len = 256
input_size = 128
hidden_size = 256
num_layers = 2
num_classes = 10

SMALL_SIZES = {"batch_size": 3, "seq_len": 7, "input_size": 5, "hidden_size": 11, "num_classes": 4}


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, num_layers: int, num_classes: int):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden_size, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.fc(out[:, -1, :])


def get_inputs():
    return [torch.randn(batch_size, seq_len, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_layers, num_classes]
