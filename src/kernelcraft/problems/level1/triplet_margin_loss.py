"""Triplet margin loss (p = 2, mean over the batch) of anchors, positives and negatives, its margin held by the module."""
import torch
import torch.nn as nn

batch_size = 4096
dim = 4096

SMALL_SIZES = {"batch_size": 37, "dim": 1000}


class Model(nn.Module):
    def __init__(self, margin: float = 1.0):
        super().__init__()
        self.loss_fn = nn.TripletMarginLoss(margin=margin)

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        return self.loss_fn(anchor, positive, negative)


def get_inputs():
    # Per-row scales, so that the margin decides some rows and the clamp at 0 others, and the mean loss differs
    # from draw to draw.
    scales = [0.5 + torch.rand(batch_size, 1) for _ in range(3)]
    return [torch.randn(batch_size, dim) * s for s in scales]


def get_init_inputs():
    return [1.0]
