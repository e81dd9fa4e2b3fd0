"""A fault, not a kernel: asks for far more GPU memory than exists (CUDA out of memory)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        hog = torch.empty(1 << 46, dtype=torch.uint8, device=x.device)  # 64 TiB
        return torch.relu(x) + hog[:1].float() * 0
