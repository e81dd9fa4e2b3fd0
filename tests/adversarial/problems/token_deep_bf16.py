"""A deep bf16 model on token ids (adversarial fixture for hack class 27, the float64 allowance): an embedding, then
`depth` residual blocks x + tanh(linear(layer_norm(x))), all in bfloat16, as a language model runs.

Its inputs carry no float: nudging them moves nothing, so the reference's own rounding cannot be sampled on
nudged inputs (each run would repeat torch's one error). Through the blocks bf16's rounding lands anywhere on each
element, and torch's one error is near zero by chance on many of them: a kernel that rounds once where torch
rounds twice (as honest as torch, off by the same amount, elsewhere) would be judged against that chance. The
reference's rounding is sampled on nudged parameters instead (inputs.nudged).
"""
import torch
import torch.nn as nn

batch_size = 8
length = 128
vocab = 1024
dim = 256
depth = 16

SMALL_SIZES = {"batch_size": 4, "length": 64}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(depth))
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(depth))
        self.to(torch.bfloat16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for norm, layer in zip(self.norms, self.layers):
            x = x + torch.tanh(layer(norm(x)))
        return x


def get_inputs():
    return [torch.randint(0, vocab, (batch_size, length))]


def get_init_inputs():
    return []
