"""RMSNorm over the last dim (level1/rmsnorm): y = x * rsqrt(mean(x^2, -1) + eps) * weight.

One thread block per row (16*1024 rows of 4096): each thread sums squares of its strided float4s,
warp-shuffle + shared-memory block reduction, then a second pass (the row is still in L1/L2)
writes x * rstd * w. Scalar path when the row length is not a multiple of 4 or a pointer is not
16-byte aligned. `self.weight` is created exactly as the problem's Model does, so the seeded init
matches.
"""
import torch
import torch.nn as nn

from kernelcraft.backends.nvrtc import load_kernels

SOURCE = r'''
__device__ __forceinline__ float block_sum(float v)
{
    __shared__ float sh[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nwarps ? sh[lane] : 0.0f;
        #pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

extern "C" __global__ void __launch_bounds__(1024)
rmsnorm_rows(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
             long long n, float eps, int vec)
{
    const float* xr = x + (long long)blockIdx.x * n;
    float* yr = y + (long long)blockIdx.x * n;
    float ss = 0.0f;
    if (vec) {
        const long long n4 = n >> 2;
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (long long i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 v = x4[i];
            ss += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
        }
    } else {
        for (long long i = threadIdx.x; i < n; i += blockDim.x) { float v = xr[i]; ss += v * v; }
    }
    const float total = block_sum(ss);
    const float rstd = 1.0f / sqrtf(total / (float)n + eps);
    if (vec) {
        const long long n4 = n >> 2;
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const float4* w4 = reinterpret_cast<const float4*>(w);
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (long long i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 v = x4[i], g = w4[i];
            v.x = v.x * rstd * g.x; v.y = v.y * rstd * g.y;
            v.z = v.z * rstd * g.z; v.w = v.w * rstd * g.w;
            y4[i] = v;
        }
    } else {
        for (long long i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * rstd * w[i];
    }
}
'''

kernels = load_kernels(SOURCE)

MAX_ROWS_PER_LAUNCH = 2**31 - 1


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32:
            raise TypeError(f"this kernel is float32-only, got {x.dtype}")
        x = x.contiguous()
        w = self.weight.contiguous()
        y = torch.empty_like(x)
        n = x.shape[-1]
        rows = x.numel() // n if n else 0
        if rows == 0:
            return y
        vec = n % 4 == 0 and all(t.data_ptr() % 16 == 0 for t in (x, w, y))
        work = n // 4 if vec else n
        threads = 32
        while threads < 1024 and threads * 4 < work:  # ~4+ items per thread, at most 1024 threads
            threads *= 2
        xv, yv = x.view(-1, n), y.view(-1, n)
        for r0 in range(0, rows, MAX_ROWS_PER_LAUNCH):
            r = min(MAX_ROWS_PER_LAUNCH, rows - r0)
            kernels.rmsnorm_rows(xv[r0:], w, yv[r0:], n, float(self.eps), int(vec),
                                 grid=(r,), block=(threads,))
        return y
