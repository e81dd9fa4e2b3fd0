"""Softmax over dim=1 (level1/softmax, (4096, 65536)): one thread block per row.

Single-pass online max+sum (each thread keeps a running (max, sum-of-exp) pair, rescaling the sum
when the max grows; pairs are merged with warp shuffles and then across warps in shared memory),
then a second pass writes exp(x - max) / sum. float4 loads/stores when the row length is a multiple
of 4 and both pointers are 16-byte aligned; scalar otherwise. Any row length and row count work;
rows of -inf give NaN like torch. Inputs of other ranks: dim 1 is moved last first.
"""
import torch
import torch.nn as nn

from kernelcraft.backends.nvrtc import load_kernels

SOURCE = r'''
#ifndef INFINITY  // NVRTC has no <math.h> macros
#define INFINITY __int_as_float(0x7f800000)
#endif

// NaN-propagating max (fmaxf would drop a NaN, and a row holding a NaN must come out all NaN).
__device__ __forceinline__ float nmax(float a, float b) { return (a != a || a > b) ? a : b; }

// Merge running (m, s) with (m2, s2): s = s*e^(m-M) + s2*e^(m2-M), M = max(m, m2).
// When both maxima are -inf nothing is added (avoids exp(-inf - -inf) = NaN).
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2)
{
    float mn = nmax(m, m2);
    if (mn == -INFINITY) return;
    s = s * expf(m - mn) + s2 * expf(m2 - mn);
    m = mn;
}

// Block-wide merge of every thread's (m, s); all threads return the row's (max, sum).
// blockDim.x must be a multiple of 32 (<= 1024).
__device__ __forceinline__ void block_merge(float& m, float& s)
{
    __shared__ float sh_m[32], sh_s[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    if (lane == 0) { sh_m[warp] = m; sh_s[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        m = lane < nwarps ? sh_m[lane] : -INFINITY;
        s = lane < nwarps ? sh_s[lane] : 0.0f;
        #pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
        if (lane == 0) { sh_m[0] = m; sh_s[0] = s; }
    }
    __syncthreads();
    m = sh_m[0];
    s = sh_s[0];
}

extern "C" __global__ void __launch_bounds__(1024)
softmax_rows(const float* __restrict__ x, float* __restrict__ y, long long n, int vec)
{
    const float* xr = x + (long long)blockIdx.x * n;
    float* yr = y + (long long)blockIdx.x * n;
    float m = -INFINITY, s = 0.0f;
    long long done = 0;
    if (vec) {  // n % 4 == 0 and 16-byte aligned rows
        const long long n4 = n >> 2;
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (long long i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 v = x4[i];
            float lm = nmax(nmax(v.x, v.y), nmax(v.z, v.w));
            float mn = nmax(m, lm);
            if (mn != -INFINITY) {
                s = s * expf(m - mn) + expf(v.x - mn) + expf(v.y - mn) + expf(v.z - mn) + expf(v.w - mn);
                m = mn;
            }
        }
        done = n4 << 2;
    }
    for (long long i = done + threadIdx.x; i < n; i += blockDim.x)
        merge(m, s, xr[i], 1.0f);

    block_merge(m, s);
    const float inv = 1.0f / s;

    if (vec) {
        const long long n4 = n >> 2;
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (long long i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 v = x4[i];
            v.x = expf(v.x - m) * inv; v.y = expf(v.y - m) * inv;
            v.z = expf(v.z - m) * inv; v.w = expf(v.w - m) * inv;
            y4[i] = v;
        }
    }
    for (long long i = done + threadIdx.x; i < n; i += blockDim.x)
        yr[i] = expf(xr[i] - m) * inv;
}
'''

kernels = load_kernels(SOURCE)

MAX_ROWS_PER_LAUNCH = 2**31 - 1


def _threads_for(n: int, vec: bool) -> int:
    work = (n // 4) if vec else n
    t = 32
    while t < 1024 and t < work:
        t *= 2
    return t


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32:
            raise TypeError(f"this kernel is float32-only, got {x.dtype}")
        moved = x.dim() != 2
        if moved:  # softmax over dim 1 of an N-d tensor: make dim 1 the contiguous last dim
            x = x.movedim(1, -1)
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.shape[-1]
        rows = x.numel() // n if n else 0
        if rows:
            vec = n % 4 == 0 and x.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0
            threads = _threads_for(n, vec)
            xv, yv = x.view(-1, n), y.view(-1, n)
            for r0 in range(0, rows, MAX_ROWS_PER_LAUNCH):  # grid.x limit
                r = min(MAX_ROWS_PER_LAUNCH, rows - r0)
                kernels.softmax_rows(xv[r0:], yv[r0:], n, int(vec), grid=(r,), block=(threads,))
        return y.movedim(-1, 1) if moved else y
