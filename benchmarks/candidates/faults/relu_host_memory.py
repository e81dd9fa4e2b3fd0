"""A fault, not a kernel: eats host memory 256 MiB at a time until something stops it."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        hoard = []
        while True:
            hoard.append(bytearray(256 << 20))  # bytearray writes its pages: real resident memory
