"""KL divergence KL(target || pred) between two softmax distributions over logits, batchmean reduction."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
dim = 4096

SMALL_SIZES = {"batch_size": 37, "dim": 1000}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred_logits: torch.Tensor, target_logits: torch.Tensor) -> torch.Tensor:
        log_p = F.log_softmax(pred_logits, dim=-1)
        log_q = F.log_softmax(target_logits, dim=-1)
        return F.kl_div(log_p, log_q, reduction="batchmean", log_target=True)


def get_inputs():
    # Random per-draw temperatures, so the (mean) loss is not nearly the same for every draw.
    scale = 3 * torch.rand(2)
    return [torch.randn(batch_size, dim) * scale[0], torch.randn(batch_size, dim) * scale[1]]


def get_init_inputs():
    return []
