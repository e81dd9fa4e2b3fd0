"""kernelcraft: turn a PyTorch program into faster, verified custom GPU kernels."""

__version__ = "0.1.0"
