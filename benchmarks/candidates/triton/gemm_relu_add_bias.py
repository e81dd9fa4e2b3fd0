"""level2/gemm_relu_add_bias fused in one Triton kernel: y = relu(x @ W.T) + bias.

nn.Linear(bias=False) weight W (out, in) is read transposed through its strides (no copy); the ReLU
and the bias add happen on the fp32 accumulator before the single store. Strict fp32 tl.dot
(`input_precision="ieee"`, no TF32), masked edges for any batch / in / out sizes. The layers are
built in the same order as the problem's Model so the seeded init matches.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_relu_bias_kernel(x_ptr, w_ptr, bias_ptr, y_ptr, M, N, K,
                            stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                            GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    group_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % group_m
    pid_n = (pid % group) // group_m

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * stride_xm + rk[None, :] * stride_xk
    w_ptrs = w_ptr + rk[:, None] * stride_wk + rn[None, :].to(tl.int64) * stride_wn   # W.T tile
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0.0)
        b = tl.load(w_ptrs, mask=(rk[:, None] + k < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")   # strict fp32, no TF32
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk
    bias = tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    out = tl.where(acc < 0, 0.0, acc) + bias[None, :]
    y_ptrs = y_ptr + rm[:, None].to(tl.int64) * stride_ym + rn[None, :] * stride_yn
    tl.store(y_ptrs, out.to(y_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


# 128x64x32, 8 warps, 3 stages: no register spills on sm_90 for the fp32 (FMA) dot with the
# K-contiguous W.T tile (128x128 tiles spill here)
BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_WARPS, NUM_STAGES = 128, 64, 32, 8, 8, 3


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(0.2 * torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])
        w = self.linear.weight
        M, K = x2.shape
        N = w.shape[0]
        y = x2.new_empty((M, N))
        if M and N:
            grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
            linear_relu_bias_kernel[grid](x2, w, self.bias, y, M, N, K,
                                          x2.stride(0), x2.stride(1), w.stride(0), w.stride(1),
                                          y.stride(0), y.stride(1),
                                          BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                                          GROUP_M=GROUP_M, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        return y.reshape(*lead, N)
