# WRONG ON PURPOSE (verifier test): returns a float16 tensor - the kernel stores __half results -
# while the reference returns float32. The values are ReLU rounded to half precision (rel. error
# ~5e-4, and inf above 65504), so a verifier must check the output dtype, not only allclose after
# casting.
"""ReLU that returns float16 instead of float32 (NVRTC)."""
import torch
import torch.nn as nn

from kernelcraft.backends.nvrtc import load_kernels

SOURCE = r'''
#include <cuda_fp16.h>

extern "C" __global__ void relu_to_half(const float* __restrict__ x, __half* __restrict__ y, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = __float2half_rn(v < 0.0f ? 0.0f : v);   // BUG: output dtype is half
    }
}
'''

kernels = load_kernels(SOURCE)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty(x.shape, dtype=torch.float16, device=x.device)   # BUG: should be x.dtype
        n = x.numel()
        if n:
            kernels.relu_to_half(x, y, n, grid=((n + 255) // 256,), block=(256,))
        return y
