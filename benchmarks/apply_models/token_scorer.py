"""A model in apply's model-and-example-inputs form (benchmarks/results/apply-tokmodel-h100-2026-11-26.json):

    kernelcraft apply benchmarks/apply_models/token_scorer.py --model builtin --rounds 1 --device cuda
"""

import torch
import torch.nn as nn


class Net(nn.Module):
    """A token scorer: a masked running sum, a linear head, the best class per position, and an argmax over
    integer ids (values past 2**24)."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(512, 256)

    def forward(self, x, mask, ids):
        run = torch.cumsum(x * mask, dim=1)
        scores = self.head(run)
        best = torch.argmax(scores, dim=-1)
        top = torch.argmax(ids, dim=1)
        return best, top


model = Net().eval()
example_inputs = [torch.randn(16, 4096, 512), torch.rand(16, 4096, 512) > 0.5, torch.randint(0, 2 ** 40, (64, 65536))]
