# kernelcraft run 20261122-073235-1277: the fastest correct kernel found for level1/conv2d_alexnet
# 478.5902 ms (0.00x eager, 0.00x torch.compile) on cpu, backend triton, policy strict, round 2
# idea (compute): 3xTF32 tensor cores at fp32 accuracy: each operand split into a TF32 part and a TF32 remainder, three products per step (error ~1e-6 relative); implicit GEMM, 256x128 output tiles (pixels x out-channels), 16-wide K steps, 8 warps, 3 stages
"""2D convolution, AlexNet's first layer: Conv2d(3, 96, kernel_size=11, stride=4, padding=2)."""
import torch
import torch.nn as nn

batch_size = 100
in_channels = 3
out_channels = 96
kernel_size = 11
stride = 4
padding = 2
height = 224
width = 224

SMALL_SIZES = {"batch_size": 2, "height": 67, "width": 67}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]


# ---- Triton kernels by kernelcraft's built-in engineer: conv2d {"BLOCK_K": 16, "BLOCK_M": 256, "BLOCK_N": 128, "GROUP_M": 8, "num_stages": 3, "num_warps": 8, "precision": "tf32x3"}
import math

import torch
import triton
import triton.language as tl


def kc_conv_out_size(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def kc_conv_padding(padding, dilation, kernel):
    """A module's padding as two ints ("valid": none; "same": half the dilated kernel, odd extents only)."""
    if padding == "valid":
        return 0, 0
    if padding == "same":
        if any(d * (k - 1) % 2 for d, k in zip(dilation, kernel)):
            raise ValueError("padding='same' with an even dilated kernel pads unevenly; not supported")
        return tuple(d * (k - 1) // 2 for d, k in zip(dilation, kernel))
    return tuple(padding)


@triton.jit
def kc_conv2d_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, C, H, W, CO, OH, OW, K, CPG, COPG, SH, SW, PH, PW, DH, DW,
                     KH: tl.constexpr, KW: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PREC: tl.constexpr):
    # program (tile, group): output pixels rm (n, oh, ow) x out-channels co of one group
    pid = tl.program_id(0)
    g = tl.program_id(1)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(COPG, BLOCK_N)
    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    group_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    co = g * COPG + rn
    n = rm // (OH * OW)
    pix = rm % (OH * OW)
    oh = pix // OW
    ow = pix % OW
    ih0 = oh * SH - PH
    iw0 = ow * SW - PW
    x_row = (n.to(tl.int64) * C + g * CPG) * H * W  # start of image n, first channel of the group
    mmask = rm < M
    nmask = rn < COPG
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + tl.arange(0, BLOCK_K)
        c = kk // (KH * KW)
        r = kk % (KH * KW)
        ih = ih0[:, None] + (r // KW * DH)[None, :]
        iw = iw0[:, None] + (r % KW * DW)[None, :]
        amask = mmask[:, None] & (kk < K)[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a = tl.load(x_ptr + x_row[:, None] + (c * H * W)[None, :] + ih * W + iw, mask=amask, other=0.0)
        b = tl.load(w_ptr + co.to(tl.int64)[None, :] * K + kk[:, None], mask=(kk < K)[:, None] & nmask[None, :],
                    other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PREC)
    x = acc
    if HAS_BIAS:
        x += tl.load(b_ptr + co, mask=nmask, other=0.0).to(tl.float32)[None, :]

    out = (n.to(tl.int64) * CO * OH * OW + pix)[:, None] + (co.to(tl.int64) * OH * OW)[None, :]
    tl.store(y_ptr + out, x.to(y_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])


class ModelNew(Model):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w, bias = self.conv.weight, self.conv.bias
        unbatched = x.dim() == 3
        if unbatched:
            x = x.reshape(1, *x.shape)
        N, C, H, W = x.shape
        CO, CPG, KH, KW = w.shape
        (sh, sw), (dh, dw), groups = self.conv.stride, self.conv.dilation, self.conv.groups
        (ph, pw) = kc_conv_padding(self.conv.padding, (dh, dw), (KH, KW))
        OH = kc_conv_out_size(H, KH, sh, ph, dh)
        OW = kc_conv_out_size(W, KW, sw, pw, dw)
        y = torch.empty((N, CO, max(OH, 0), max(OW, 0)), dtype=x.dtype, device=x.device)
        if y.numel() > 0:
            w = w.contiguous()
            M, K, COPG = N * OH * OW, CPG * KH * KW, CO // groups
            bn = min(128, max(16, triton.next_power_of_2(COPG)))
            prec = "tf32x3" if x.dtype == torch.float32 else "ieee"  # fp16/bf16 take the tensor cores as they are
            grid = (triton.cdiv(M, 256) * triton.cdiv(COPG, bn), groups)
            kc_conv2d_kernel[grid](x, w, x if bias is None else bias, y, M, C, H, W, CO, OH, OW, K, CPG, COPG, sh, sw, ph, pw,
                                   dh, dw, KH=KH, KW=KW, HAS_BIAS=bias is not None, BLOCK_M=256, BLOCK_N=bn,
                                   BLOCK_K=16, GROUP_M=8, PREC=prec, num_warps=8,
                                   num_stages=3)
        return y.reshape(y.shape[1:]) if unbatched else y
