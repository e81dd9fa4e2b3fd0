"""A fault, not a kernel: raises SystemExit(0) inside forward()."""
import sys

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        sys.exit(0)
