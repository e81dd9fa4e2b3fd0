"""A fault, not a kernel: writes 64 MiB blocks to a file in its directory until stopped."""
import os

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        block = os.urandom(64 << 20)
        with open("fill.bin", "wb") as sink:
            while True:
                sink.write(block)
                sink.flush()
