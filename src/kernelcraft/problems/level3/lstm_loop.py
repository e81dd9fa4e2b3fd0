"""Single-layer LSTM unrolled over time with nn.LSTMCell; returns all hidden states (batch, seq, hidden)."""
import torch
import torch.nn as nn

batch_size = 64
seq_len = 128
input_size = 256
hidden_size = 512

SMALL_SIZES = {"batch_size": 3, "seq_len": 11, "input_size": 13, "hidden_size": 29}


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.cell = nn.LSTMCell(input_size, hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        h = x.new_zeros(b, self.hidden_size)
        c = x.new_zeros(b, self.hidden_size)
        outputs = []
        for i in range(t):
            h, c = self.cell(x[:, i], (h, c))
            outputs.append(h)
        return torch.stack(outputs, dim=1)


def get_inputs():
    return [torch.randn(batch_size, seq_len, input_size)]


def get_init_inputs():
    return [input_size, hidden_size]
