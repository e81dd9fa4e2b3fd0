"""A fault, not a kernel: a kernel that never ends. The verifier must time out, kill the worker's
process group, and evaluate the next candidate normally."""
import torch
import torch.nn as nn
from kernelcraft.backends.nvrtc import load_kernels

SOURCE = r'''
extern "C" __global__ void relu_hang(const float* x, float* y, long long n) {
    // volatile loads of memory nothing changes: the loop cannot be optimised away, and never ends
    volatile const float* v = x;
    float first = v[0];
    while (v[0] == first) { }
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
'''
kernels = load_kernels(SOURCE)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        kernels.relu_hang(x, y, x.numel(), grid=((x.numel() + 255) // 256,), block=(256,))
        return y
