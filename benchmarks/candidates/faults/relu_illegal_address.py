"""A fault, not a kernel: writes a terabyte past its output, a sticky CUDA error (illegal address).
The verifier must report runtime_error and evaluate the next candidate normally."""
import torch
import torch.nn as nn
from kernelcraft.backends.nvrtc import load_kernels

SOURCE = r'''
extern "C" __global__ void relu_bad(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    // (a constant null pointer would be undefined behaviour the compiler deletes; this is not)
    if (i < n) y[i + (1LL << 38)] = x[i] > 0.f ? x[i] : 0.f;
}
'''
kernels = load_kernels(SOURCE)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        kernels.relu_bad(x, y, x.numel(), grid=((x.numel() + 255) // 256,), block=(256,))
        return y
