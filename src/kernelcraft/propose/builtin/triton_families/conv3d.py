"""3-D convolution family (nn.Conv3d / F.conv3d, any stride/padding/dilation/groups, with a pointwise epilogue):
implicit GEMM, conv.py's kernel with one more spatial axis.

M = N*OD*OH*OW output voxels, N = the out-channels of a group, K = (in-channels of a group)*KD*KH*KW. A program
owns a BLOCK_M x BLOCK_N tile (conv.py's swizzled prologue); each K step decodes its K indices into (channel,
kd, kh, kw), gathers the BLOCK_M x BLOCK_K patch straight from x (padding as a mask, no im2col buffer) and the
matching weights (contiguous along K), and accumulates tl.dot in fp32 at the move's precision. Bias and the
pointwise steps after the conv are applied to the fp32 tile before its only store. Depthwise 3-D convs run on
the same grouped GEMM (no stencil kernel of their own: correct, though most of a BLOCK_N tile idles).
"""

from __future__ import annotations

from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.codegen import attr, indent
from kernelcraft.propose.builtin.triton_families.conv import GATHER, TILE, _OUT_SIZE, conv_moves, hyper_lines, \
    precision
from kernelcraft.propose.builtin.steps import step_lines


def _conv3d_moves(op: Op) -> list[tuple]:
    return conv_moves(op, "Implicit GEMM over (N, D, H, W) outputs: " + GATHER, "voxels", "3-D implicit GEMM")


_CONV3D = '''
@triton.jit
def kc_conv3d_kernel(${scalars}x_ptr, w_ptr, b_ptr, y_ptr, M, C, D, H, W, CO, OD, OH, OW, K, CPG, COPG, SD, SH, SW, PD, PH, PW,
                     DD, DH, DW, KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, HAS_BIAS: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                     PREC: tl.constexpr):
    # program (tile, group): output voxels rm (n, od, oh, ow) x out-channels co of one group
$tile
    n = rm // (OD * OH * OW)
    vox = rm % (OD * OH * OW)
    od = vox // (OH * OW)
    oh = vox // OW % OH
    ow = vox % OW
    id0 = od * SD - PD
    ih0 = oh * SH - PH
    iw0 = ow * SW - PW
    x_row = (n.to(tl.int64) * C + g * CPG) * D * H * W  # start of volume n, first channel of the group
    mmask = rm < M
    nmask = rn < COPG
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + tl.arange(0, BLOCK_K)
        c = kk // (KD * KH * KW)
        r = kk % (KD * KH * KW)
        id_ = id0[:, None] + (r // (KH * KW) * DD)[None, :]
        ih = ih0[:, None] + (r // KW % KH * DH)[None, :]
        iw = iw0[:, None] + (r % KW * DW)[None, :]
        amask = (mmask[:, None] & (kk < K)[None, :] & (id_ >= 0) & (id_ < D) & (ih >= 0) & (ih < H) & (iw >= 0)
                 & (iw < W))
        a = tl.load(x_ptr + x_row[:, None] + (c.to(tl.int64) * D * H * W)[None, :] + (id_ * H + ih) * W + iw,
                    mask=amask, other=0.0)
        b = tl.load(w_ptr + co.to(tl.int64)[None, :] * K + kk[:, None], mask=(kk < K)[:, None] & nmask[None, :],
                    other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PREC)
    x = acc
    if HAS_BIAS:
        x += tl.load(b_ptr + co, mask=nmask, other=0.0).to(tl.float32)[None, :]
$steps
    out = (n.to(tl.int64) * CO * OD * OH * OW + vox)[:, None] + (co.to(tl.int64) * OD * OH * OW)[None, :]
    tl.store(y_ptr + out, x.to(y_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])
'''


def _render_conv3d(op: Op, p: dict) -> tuple[list[str], str]:
    d = op.detail
    bm, bn, bk, group = int(p["BLOCK_M"]), int(p["BLOCK_N"]), int(p["BLOCK_K"]), int(p["GROUP_M"])
    prec = precision(p)
    steps = indent("\n".join(step_lines(d.get("steps", []))), 4)
    s = Scalars.of(op)  # the numbers the steps read from the module: the kernel's first parameters
    kernel = s.fill(_CONV3D.replace("$tile", TILE).replace("$steps", steps))
    bias = attr(d["bias"]) if d.get("bias") else "None"
    body = f'''
w, bias = {attr(d["weight"])}, {bias}
unbatched = x.dim() == 4
if unbatched:
    x = x.reshape(1, *x.shape)
N, C, D, H, W = x.shape
CO, CPG, KD, KH, KW = w.shape
{hyper_lines(d, ("stride", "dilation", "padding"), "dhw")}
OD = kc_conv_out_size(D, KD, sd, pd, dd)
OH = kc_conv_out_size(H, KH, sh, ph, dh)
OW = kc_conv_out_size(W, KW, sw, pw, dw)
y = torch.empty((N, CO, max(OD, 0), max(OH, 0), max(OW, 0)), dtype=x.dtype, device=x.device)
if y.numel() > 0:
    w = w.contiguous()
    M, K, COPG = N * OD * OH * OW, CPG * KD * KH * KW, CO // groups
    bn = min({bn}, max(16, triton.next_power_of_2(COPG)))
    prec = "{prec}" if x.dtype == torch.float32 else "ieee"  # fp16/bf16 take the tensor cores as they are
    grid = (triton.cdiv(M, {bm}) * triton.cdiv(COPG, bn), groups)
    kc_conv3d_kernel[grid](
        {s.params}x, w, x if bias is None else bias, y, M, C, D, H, W, CO, OD, OH, OW, K, CPG, COPG, sd, sh, sw, pd, ph, pw,
        dd, dh, dw, KD=KD, KH=KH, KW=KW, HAS_BIAS=bias is not None, BLOCK_M={bm}, BLOCK_N=bn, BLOCK_K={bk},
        GROUP_M={group}, PREC=prec, num_warps={int(p["num_warps"])}, num_stages={int(p["num_stages"])})
return y.reshape(y.shape[1:]) if unbatched else y'''
    return [_OUT_SIZE, kernel], body


KINDS = {"conv3d": (_conv3d_moves, _render_conv3d)}
