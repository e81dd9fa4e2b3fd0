"""Wastefully slow ReLU (adversarial fixture for hack class 20): y = relu(x), computed by thousands
of tiny eager ops that cancel exactly (relu is idempotent, *2 then *0.5 is exact in binary floating
point). Its eager time is almost all Python and dispatch overhead, so any one-kernel candidate shows
an absurd speedup that says nothing about the kernel: the verifier must flag it (speedup_review).
"""
import torch
import torch.nn as nn

batch_size = 16
dim = 256
ROUNDS = 5000

SMALL_SIZES = {"batch_size": 16, "dim": 256}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x
        for _ in range(ROUNDS):
            y = torch.relu(y) * 2.0 * 0.5
        return y


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
