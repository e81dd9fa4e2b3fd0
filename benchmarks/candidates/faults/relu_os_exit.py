"""A fault, not a kernel: ends its process with status 0 in the middle of a call."""
import os

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os._exit(0)
