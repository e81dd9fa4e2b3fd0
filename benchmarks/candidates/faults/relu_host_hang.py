"""A fault, not a kernel: an infinite loop on the host inside forward()."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        while True:
            pass
