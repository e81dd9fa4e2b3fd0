"""Sum over one dim (level1/sum_dim) as a CPU C++ extension (load_inline, cpp_sources only).

The contiguous input is viewed as (outer, R, inner) around the reduced dim (any dim, any rank):
  * inner == 1: each output is a plain loop over a contiguous row (double accumulator);
  * inner > 1: for each outer index the R rows of `inner` floats are added into a double buffer
    row by row (unit-stride inner loop the compiler vectorises).
Output rows are split across torch's intra-op threads. A tensor on another device is computed on
a CPU copy and moved back.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r'''
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <vector>

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.device().is_cpu(), "sum_dim_forward: CPU tensor expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "sum_dim_forward: float32 expected");
    x = x.contiguous();
    const int64_t nd = x.dim();
    TORCH_CHECK(nd >= 1, "sum_dim_forward: at least 1-d");
    dim = ((dim % nd) + nd) % nd;
    int64_t outer = 1, inner = 1;
    std::vector<int64_t> out_shape;
    for (int64_t d = 0; d < nd; ++d) {
        if (d < dim) outer *= x.size(d);
        if (d > dim) inner *= x.size(d);
        if (d != dim) out_shape.push_back(x.size(d));
    }
    const int64_t r = x.size(dim);
    auto y = torch::empty(out_shape, x.options());
    if (y.numel() == 0) return y;
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    if (inner == 1) {
        at::parallel_for(0, outer, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(r, 1)),
                         [&](int64_t begin, int64_t end) {
            for (int64_t o = begin; o < end; ++o) {
                const float* xr = in + o * r;
                double s = 0.0;
                for (int64_t k = 0; k < r; ++k) s += xr[k];
                out[o] = (float)s;
            }
        });
    } else {
        at::parallel_for(0, outer, 1, [&](int64_t begin, int64_t end) {
            std::vector<double> acc(inner);
            for (int64_t o = begin; o < end; ++o) {
                std::fill(acc.begin(), acc.end(), 0.0);
                const float* xo = in + o * r * inner;
                for (int64_t k = 0; k < r; ++k) {
                    const float* xr = xo + k * inner;
                    for (int64_t j = 0; j < inner; ++j) acc[j] += xr[j];
                }
                float* yo = out + o * inner;
                for (int64_t j = 0; j < inner; ++j) yo[j] = (float)acc[j];
            }
        });
    }
    return y;
}
'''

sum_ext = load_inline(name="kc_cpp_sum_dim", cpp_sources=CPP_SOURCE, functions=["sum_dim_forward"],
                      extra_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_ext.sum_dim_forward(x.cpu(), self.dim).to(x.device)
