"""Softmax over dim=1 (level1/softmax) as a CPU C++ extension (load_inline, cpp_sources only).

Rows of the contiguous (rows, n) float32 view are split across torch's intra-op threads; each row
takes three plain loops: max, sum of exp(x - max) (accumulated in double), then scale. Inputs of
other ranks have dim 1 moved last first. A tensor on another device is computed on a CPU copy.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r'''
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <cmath>
#include <limits>

// softmax over the last dim of a contiguous float32 tensor
torch::Tensor softmax_lastdim(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "softmax_lastdim: CPU tensor expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "softmax_lastdim: float32 expected");
    TORCH_CHECK(x.dim() >= 1, "softmax_lastdim: at least 1-d");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t n = x.size(-1);
    if (n == 0 || x.numel() == 0) return y;
    const int64_t rows = x.numel() / n;
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t grain = std::max<int64_t>(1, (1 << 16) / n);
    at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const float* xr = in + r * n;
            float* yr = out + r * n;
            float m = -std::numeric_limits<float>::infinity();
            bool nan = false;
            for (int64_t i = 0; i < n; ++i) { m = xr[i] > m ? xr[i] : m; nan |= std::isnan(xr[i]); }
            double s = 0.0;
            for (int64_t i = 0; i < n; ++i) {
                const float e = std::exp(xr[i] - m);   // all -inf row: NaN, like torch
                yr[i] = e;
                s += e;
            }
            const float inv = nan ? std::numeric_limits<float>::quiet_NaN() : (float)(1.0 / s);
            for (int64_t i = 0; i < n; ++i) yr[i] *= inv;
        }
    });
    return y;
}
'''

softmax_ext = load_inline(name="kc_cpp_softmax", cpp_sources=CPP_SOURCE, functions=["softmax_lastdim"],
                          extra_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        device = x.device
        moved = x.dim() != 2
        if moved:
            x = x.movedim(1, -1)
        y = softmax_ext.softmax_lastdim(x.cpu().contiguous())
        if moved:
            y = y.movedim(-1, 1)
        return y.to(device)
