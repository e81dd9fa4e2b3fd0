"""RMSNorm over the last dim (level1/rmsnorm) as a load_inline CUDA extension:
y = x * rsqrt(mean(x^2, -1) + eps) * weight.

One thread block per row: per-thread sum of squares over strided float4s, warp-shuffle +
shared-memory block reduction, then a second pass (row still in L1/L2) writes x * rstd * w.
Scalar path when the row length is not a multiple of 4 or a pointer is misaligned.
`self.weight` is created exactly as the problem's Model does (same seeded init).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r'''
#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>

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

__global__ void __launch_bounds__(1024)
rmsnorm_rows_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                    int64_t n, float eps, bool vec)
{
    const float* xr = x + (int64_t)blockIdx.x * n;
    float* yr = y + (int64_t)blockIdx.x * n;
    float ss = 0.0f;
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (int64_t i = threadIdx.x; i < (n >> 2); i += blockDim.x) {
            const float4 v = x4[i];
            ss += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
        }
    } else {
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) { const float v = xr[i]; ss += v * v; }
    }
    const float rstd = 1.0f / sqrtf(block_sum(ss) / (float)n + eps);
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const float4* w4 = reinterpret_cast<const float4*>(w);
        float4* y4 = reinterpret_cast<float4*>(yr);
        for (int64_t i = threadIdx.x; i < (n >> 2); i += blockDim.x) {
            float4 v = x4[i];
            const float4 g = w4[i];
            v.x = v.x * rstd * g.x; v.y = v.y * rstd * g.y;
            v.z = v.z * rstd * g.z; v.w = v.w * rstd * g.w;
            y4[i] = v;
        }
    } else {
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * rstd * w[i];
    }
}

torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor weight, double eps)
{
    TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "rmsnorm_forward: CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat,
                "rmsnorm_forward: float32 expected");
    TORCH_CHECK(x.dim() >= 1 && weight.numel() == x.size(-1), "rmsnorm_forward: weight must match the last dim");
    const c10::cuda::OptionalCUDAGuard guard(x.device());
    x = x.contiguous();
    weight = weight.contiguous();
    auto y = torch::empty_like(x);
    const int64_t n = x.size(-1);
    if (n == 0 || x.numel() == 0) return y;
    const int64_t rows = x.numel() / n;
    const float* xp = x.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const bool vec = n % 4 == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(wp) % 16 == 0 && reinterpret_cast<uintptr_t>(yp) % 16 == 0;
    const int64_t work = vec ? n / 4 : n;
    int threads = 32;
    while (threads < 1024 && (int64_t)threads * 4 < work) threads *= 2;   // ~4 items per thread
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    const int64_t max_grid = 2147483647LL;
    for (int64_t r0 = 0; r0 < rows; r0 += max_grid) {
        const int64_t r = std::min(max_grid, rows - r0);
        rmsnorm_rows_kernel<<<(unsigned)r, threads, 0, stream>>>(xp + r0 * n, wp, yp + r0 * n, n,
                                                                 (float)eps, vec);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
'''

CPP_SOURCE = "torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor weight, double eps);"

rmsnorm_ext = load_inline(name="kc_inline_rmsnorm", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                          functions=["rmsnorm_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rmsnorm_ext.rmsnorm_forward(x, self.weight, float(self.eps))
