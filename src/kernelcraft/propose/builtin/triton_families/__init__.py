"""Triton kernel families of the built-in engineer; triton_kernels.py is their registry."""
