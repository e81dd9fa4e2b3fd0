# WRONG ON PURPOSE (verifier test): off-by-one bound - the kernel guards with `if (i < n - 1)`, so
# the LAST element of the output is never written and holds whatever torch.empty_like's memory
# held. A verifier catches it when that element of the reference is non-zero (about half the randn
# draws) and the output buffer is not a recycled copy of a correct result - keep the reference
# output alive (or poison fresh outputs) so the caching allocator cannot hand back correct values.
"""ReLU with an off-by-one tail bug (NVRTC)."""
import torch
import torch.nn as nn

from kernelcraft.backends.nvrtc import load_kernels

SOURCE = r'''
extern "C" __global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n - 1) {                 // BUG: should be i < n
        float v = x[i];
        y[i] = v < 0.0f ? 0.0f : v;
    }
}
'''

kernels = load_kernels(SOURCE)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n:
            kernels.relu_kernel(x, y, n, grid=((n + 255) // 256,), block=(256,))
        return y
