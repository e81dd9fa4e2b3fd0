"""LayerNorm over the trailing dims (level1/layernorm: LayerNorm((64,256,256)) on (16,64,256,256)).

One normalised row is 64*256*256 = 4M elements and there are only 16 rows, so one block per row
would use 16 SMs. Three kernels instead:
  1. ln_partial: grid = rows * chunks; each block sums (x - K) and (x - K)^2 over one chunk of a
     row (K = the row's first element, a shift that keeps the variance accurate when |mean| >> std),
     per-thread in fp32 over a few dozen elements, across the block in fp64; writes one fp64 pair.
  2. ln_stats: one block per row merges that row's partial pairs in fp64 -> mean, rstd (biased
     variance, rstd = 1/sqrt(var + eps), as torch).
  3. ln_apply: grid = rows * blocks_per_row; y = (x - mean) * rstd * weight + bias, with weight/bias
     indexed by the position inside the row (they have the normalized_shape).
float4 paths when the row length is a multiple of 4 and all pointers are 16-byte aligned.
The parameters live in `self.ln` (an nn.LayerNorm built exactly like the problem's) so the seeded
init, state_dict names and eps match.
"""
import math

import torch
import torch.nn as nn

from kernelcraft.backends.nvrtc import load_kernels

SOURCE = r'''
__device__ __forceinline__ double warp_sum_d(double v)
{
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Sum of a and b over the block (blockDim.x a multiple of 32); the result is valid in thread 0.
__device__ __forceinline__ void block_sum2_d(double& a, double& b)
{
    __shared__ double sa[32], sb[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    a = warp_sum_d(a);
    b = warp_sum_d(b);
    if (lane == 0) { sa[warp] = a; sb[warp] = b; }
    __syncthreads();
    if (warp == 0) {
        a = lane < nwarps ? sa[lane] : 0.0;
        b = lane < nwarps ? sb[lane] : 0.0;
        a = warp_sum_d(a);
        b = warp_sum_d(b);
    }
}

// partials[2*blk] = sum(x - K), partials[2*blk+1] = sum((x - K)^2) over chunk (blk % chunks) of
// row (blk / chunks); chunk_len is a multiple of 4.
extern "C" __global__ void __launch_bounds__(256)
ln_partial(const float* __restrict__ x, double* __restrict__ partials,
           long long n, long long chunks, long long chunk_len, int vec)
{
    const long long blk = blockIdx.x;
    const long long row = blk / chunks, chunk = blk - row * chunks;
    const float* xr = x + row * n;
    const float k = xr[0];
    const long long start = chunk * chunk_len;
    const long long end = min(n, start + chunk_len);
    float s = 0.0f, q = 0.0f;
    long long i = start + 4 * (long long)threadIdx.x;
    if (vec) {
        for (; i + 3 < end; i += 4 * (long long)blockDim.x) {
            float4 v = *reinterpret_cast<const float4*>(xr + i);
            float a = v.x - k, b = v.y - k, c = v.z - k, d = v.w - k;
            s += (a + b) + (c + d);
            q += (a * a + b * b) + (c * c + d * d);
        }
    } else {
        for (; i < end; i += 4 * (long long)blockDim.x) {
            #pragma unroll
            for (int j = 0; j < 4; ++j) {
                if (i + j < end) { float a = xr[i + j] - k; s += a; q += a * a; }
            }
        }
    }
    double ds = s, dq = q;
    block_sum2_d(ds, dq);
    if (threadIdx.x == 0) { partials[2 * blk] = ds; partials[2 * blk + 1] = dq; }
}

// stats[2*row] = mean, stats[2*row+1] = rstd.
extern "C" __global__ void __launch_bounds__(256)
ln_stats(const float* __restrict__ x, const double* __restrict__ partials, float* __restrict__ stats,
         long long n, long long chunks, double eps)
{
    const long long row = blockIdx.x;
    const double* p = partials + 2 * row * chunks;
    double s = 0.0, q = 0.0;
    for (long long c = threadIdx.x; c < chunks; c += blockDim.x) { s += p[2 * c]; q += p[2 * c + 1]; }
    block_sum2_d(s, q);
    if (threadIdx.x == 0) {
        const double mean_shifted = s / (double)n;
        double var = q / (double)n - mean_shifted * mean_shifted;
        if (var < 0.0) var = 0.0;
        stats[2 * row] = (float)((double)x[row * n] + mean_shifted);
        stats[2 * row + 1] = (float)(1.0 / sqrt(var + eps));
    }
}

// y = (x - mean) * rstd * w + b over row (blk / bpr), elements strided by blockDim within the
// row's share for block (blk % bpr). has_w / has_b: elementwise_affine / bias flags.
extern "C" __global__ void __launch_bounds__(256)
ln_apply(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
         const float* __restrict__ stats, float* __restrict__ y,
         long long n, long long bpr, int vec, int has_w, int has_b)
{
    const long long blk = blockIdx.x;
    const long long row = blk / bpr, part = blk - row * bpr;
    const float mean = stats[2 * row], rstd = stats[2 * row + 1];
    const float* xr = x + row * n;
    float* yr = y + row * n;
    const long long step = bpr * (long long)blockDim.x;
    if (vec) {
        const long long n4 = n >> 2;
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const float4* w4 = reinterpret_cast<const float4*>(w);
        const float4* b4 = reinterpret_cast<const float4*>(b);
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (long long i = part * blockDim.x + threadIdx.x; i < n4; i += step) {
            float4 v = x4[i];
            v.x = (v.x - mean) * rstd; v.y = (v.y - mean) * rstd;
            v.z = (v.z - mean) * rstd; v.w = (v.w - mean) * rstd;
            if (has_w) { float4 g = w4[i]; v.x *= g.x; v.y *= g.y; v.z *= g.z; v.w *= g.w; }
            if (has_b) { float4 h = b4[i]; v.x += h.x; v.y += h.y; v.z += h.z; v.w += h.w; }
            y4[i] = v;
        }
    } else {
        for (long long i = part * blockDim.x + threadIdx.x; i < n; i += step) {
            float v = (xr[i] - mean) * rstd;
            if (has_w) v *= w[i];
            if (has_b) v += b[i];
            yr[i] = v;
        }
    }
}
'''

kernels = load_kernels(SOURCE)

THREADS = 256
CHUNK = THREADS * 4 * 8      # elements per ln_partial block (multiple of 4): 32 per thread
APPLY_PER_BLOCK = THREADS * 4 * 8


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32:
            raise TypeError(f"this kernel is float32-only, got {x.dtype}")
        x = x.contiguous()
        y = torch.empty_like(x)
        n = math.prod(self.ln.normalized_shape)
        rows = x.numel() // n if n else 0
        if rows == 0 or n == 0:
            return y
        w = self.ln.weight.contiguous() if self.ln.weight is not None else None
        b = self.ln.bias.contiguous() if self.ln.bias is not None else None
        ptrs = [t.data_ptr() for t in (x, y, w, b) if t is not None]
        vec = n % 4 == 0 and all(p % 16 == 0 for p in ptrs)

        chunks = (n + CHUNK - 1) // CHUNK
        partials = torch.empty(rows * chunks * 2, dtype=torch.float64, device=x.device)
        stats = torch.empty(rows * 2, dtype=torch.float32, device=x.device)
        kernels.ln_partial(x, partials, n, chunks, CHUNK, int(vec),
                           grid=(rows * chunks,), block=(THREADS,))
        kernels.ln_stats(x, partials, stats, n, chunks, float(self.ln.eps),
                         grid=(rows,), block=(THREADS,))
        bpr = (n + APPLY_PER_BLOCK - 1) // APPLY_PER_BLOCK
        kernels.ln_apply(x, w if w is not None else x, b if b is not None else x, stats, y,
                         n, bpr, int(vec), int(w is not None), int(b is not None),
                         grid=(rows * bpr,), block=(THREADS,))
        return y
