"""A fault, not a kernel: the host process segfaults inside forward()."""
import ctypes

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        ctypes.string_at(0)
        return x
