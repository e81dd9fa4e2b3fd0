# WRONG ON PURPOSE (verifier test): data race in the block reduction. Each warp writes its partial
# max / sum to shared memory and warp 0 then reads all of them - but the __syncthreads() between
# the writes and the read is missing, so warp 0 usually reads slots other warps have not written
# yet (stale shared memory from an earlier block on the SM). The result depends on warp timing:
# usually wildly wrong, occasionally right. A verifier should run it several times / on several
# inputs and fail it on any mismatch.
"""Row softmax whose block reduction is missing a __syncthreads (NVRTC)."""
import torch
import torch.nn as nn

from kernelcraft.backends.nvrtc import load_kernels

SOURCE = r'''
#define NEG_INF __int_as_float(0xff800000)

extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, long long n)
{
    __shared__ float sh[32];
    const float* xr = x + (long long)blockIdx.x * n;
    float* yr = y + (long long)blockIdx.x * n;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;

    // ---- row max ----
    float m = NEG_INF;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, xr[i]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0) sh[warp] = m;
    // BUG: missing __syncthreads() here - warp 0 may read sh[] before the other warps wrote it
    if (warp == 0) {
        m = lane < nwarps ? sh[lane] : NEG_INF;
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (lane == 0) sh[0] = m;
    }
    __syncthreads();
    m = sh[0];
    __syncthreads();

    // ---- sum of exp ----
    float s = 0.0f;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) s += expf(xr[i] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) sh[warp] = s;
    // BUG (same): missing __syncthreads()
    if (warp == 0) {
        s = lane < nwarps ? sh[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) sh[0] = s;
    }
    __syncthreads();
    const float inv = 1.0f / sh[0];

    for (long long i = threadIdx.x; i < n; i += blockDim.x) yr[i] = expf(xr[i] - m) * inv;
}
'''

kernels = load_kernels(SOURCE)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.shape[-1]
        rows = x.numel() // n if n else 0
        if rows:
            kernels.softmax_rows(x, y, n, grid=(rows,), block=(1024,))
        return y
