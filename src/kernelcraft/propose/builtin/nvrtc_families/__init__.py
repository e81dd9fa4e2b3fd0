"""CUDA kernel families of the built-in engineer, compiled with NVRTC; nvrtc_kernels.py is their registry."""
