"""Transposed 2-D convolution family (nn.ConvTranspose2d / F.conv_transpose2d, any stride, padding,
output_padding, dilation and groups, with a pointwise epilogue): a sub-pixel (phase) decomposition into implicit
GEMMs that gather.

Input pixel ih feeds output oh = ih*s - p + kh*d, so an output gathers the inputs ih = (oh + p - kh*d) / s for
the taps kh where that division is exact. Which taps those are depends only on the output's phase oh mod s: for
phase r they are kh = f, f + t, f + 2t, ... (t = s / gcd(s, d), f the first solution of kh*d = r + p mod s, none
for some phases when gcd(s, d) > 1), and along the phase's outputs oh = r + s*j the input is ih = j + base - tap*e
(base = (r + p - f*d) / s, e = d*t / s): a dense, stride-1 convolution over only the taps that contribute. So
each phase (rh, rw) is one launch of an implicit GEMM with M = N * (outputs of the phase), N = the out-channels of
a group, K = (in-channels of a group) * (its taps): no zero-inserted input, no MAC on a tap that cannot reach,
and stride 1 is the plain gather formulation (one phase, every tap). A phase no tap reaches gets bias and the
epilogue only (K = 0). The host works out each phase's taps with kc_phase_taps, in plain integers.

Weights stay as the module holds them, (C_in, C_out/groups, KH, KW): the B tile is gathered (out-channels
strided by KH*KW), served from L2. Outputs of a phase are stored s apart along W.
"""

from __future__ import annotations

from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.triton_families.common import attr, indent
from kernelcraft.propose.builtin.triton_families.conv import TILE, conv_moves, hyper_lines, precision
from kernelcraft.propose.builtin.triton_families.pointwise import step_lines


def _moves(op: Op) -> list[tuple]:
    return conv_moves(op, "Sub-pixel decomposition: one implicit GEMM per output phase (oh, ow mod stride) over only "
                          "the taps that reach it, inputs gathered straight from x (no zero-inserted buffer)",
                      gemm="implicit GEMM per output phase")


_PHASE_TAPS = '''
def kc_phase_taps(r, s, p, d, k):
    """The taps of a transposed conv axis (stride s, padding p, dilation d, k taps) that reach the outputs
    o = r + s*j: (first tap, tap step, number of taps, base, shift), the input of output j and tap number i being
    j + base - i*shift."""
    first = -1
    for t in range(s):
        if first < 0 and (t * d - r - p) % s == 0:
            first = t
    step = 1
    while step * d % s != 0:
        step += 1
    if first < 0 or first >= k:
        return 0, 1, 0, 0, 0
    return first, step, (k - first + step - 1) // step, (r + p - first * d) // s, step * d // s
'''


_KERNEL = '''
@triton.jit
def kc_conv_transpose2d_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, C, H, W, CO, OH, OW, OHR, OWR, K, CPG, COPG, KH, KW,
                               RH, RW, SH, SW, FH, FW, TH, TW, BH, BW, EH, EW, NH: tl.constexpr, NW: tl.constexpr,
                               HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PREC: tl.constexpr):
    # program (tile, group) of phase (RH, RW): outputs rm (n, jh, jw) at (RH + jh*SH, RW + jw*SW) x out-channels co
$tile
    n = rm // (OHR * OWR)
    pix = rm % (OHR * OWR)
    jh = pix // OWR
    jw = pix % OWR
    ih0 = jh + BH
    iw0 = jw + BW
    x_row = (n.to(tl.int64) * C + g * CPG) * H * W  # start of image n, first channel of the group
    mmask = rm < M
    nmask = rn < COPG
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + tl.arange(0, BLOCK_K)  # (channel c, tap th, tap tw)
        c = kk // (NH * NW)
        th = kk // NW % NH
        tw = kk % NW
        ih = ih0[:, None] - (th * EH)[None, :]
        iw = iw0[:, None] - (tw * EW)[None, :]
        amask = mmask[:, None] & (kk < K)[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a = tl.load(x_ptr + x_row[:, None] + (c * H * W)[None, :] + ih * W + iw, mask=amask, other=0.0)
        tap = (FH + th * TH) * KW + FW + tw * TW
        wk = (g * CPG + c).to(tl.int64) * COPG * KH * KW + tap  # weight (C_in, C_out/groups, KH, KW)
        b = tl.load(w_ptr + wk[:, None] + (rn * KH * KW)[None, :], mask=(kk < K)[:, None] & nmask[None, :],
                    other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PREC)
    x = acc
    if HAS_BIAS:
        x += tl.load(b_ptr + co, mask=nmask, other=0.0).to(tl.float32)[None, :]
$steps
    pixel = (RH + jh * SH) * OW + RW + jw * SW
    out = (n.to(tl.int64) * CO * OH * OW + pixel)[:, None] + (co.to(tl.int64) * OH * OW)[None, :]
    tl.store(y_ptr + out, x.to(y_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])
'''


def _render(op: Op, p: dict) -> tuple[list[str], str]:
    d = op.detail
    bm, bn, bk, group = int(p["BLOCK_M"]), int(p["BLOCK_N"]), int(p["BLOCK_K"]), int(p["GROUP_M"])
    prec = precision(p)
    steps = indent("\n".join(step_lines(d.get("steps", []))), 4)
    kernel = _KERNEL.replace("$tile", TILE).replace("$steps", steps)
    bias = attr(d["bias"]) if d.get("bias") else "None"
    body = f'''
w, bias = {attr(d["weight"])}, {bias}
unbatched = x.dim() == 3
if unbatched:
    x = x.reshape(1, *x.shape)
N, C, H, W = x.shape
CI, COPG, KH, KW = w.shape
{hyper_lines(d, ("stride", "padding", "output_padding", "dilation"), "hw", padding_strings=False)}
OH = (H - 1) * sh - 2 * ph + dh * (KH - 1) + oph + 1
OW = (W - 1) * sw - 2 * pw + dw * (KW - 1) + opw + 1
CO, CPG = COPG * groups, C // groups
y = torch.empty((N, CO, max(OH, 0), max(OW, 0)), dtype=x.dtype, device=x.device)
if y.numel() > 0:
    w = w.contiguous()
    bn = min({bn}, max(16, triton.next_power_of_2(COPG)))
    prec = "{prec}" if x.dtype == torch.float32 else "ieee"  # fp16/bf16 take the tensor cores as they are
    for rh in range(min(sh, OH)):  # one launch per output phase (rh, rw)
        fh, th, nh, bh, eh = kc_phase_taps(rh, sh, ph, dh, KH)
        for rw in range(min(sw, OW)):
            fw, tw, nw, bw, ew = kc_phase_taps(rw, sw, pw, dw, KW)
            OHR, OWR = (OH - rh + sh - 1) // sh, (OW - rw + sw - 1) // sw
            M, K = N * OHR * OWR, CPG * nh * nw  # K == 0: no tap reaches this phase, bias only
            grid = (triton.cdiv(M, {bm}) * triton.cdiv(COPG, bn), groups)
            kc_conv_transpose2d_kernel[grid](
                x, w, x if bias is None else bias, y, M, C, H, W, CO, OH, OW, OHR, OWR, K, CPG, COPG, KH, KW,
                rh, rw, sh, sw, fh, fw, th, tw, bh, bw, eh, ew, NH=max(nh, 1), NW=max(nw, 1),
                HAS_BIAS=bias is not None, BLOCK_M={bm}, BLOCK_N=bn, BLOCK_K={bk}, GROUP_M={group},
                PREC=prec, num_warps={int(p["num_warps"])}, num_stages={int(p["num_stages"])})
return y.reshape(y.shape[1:]) if unbatched else y'''
    return [_PHASE_TAPS, kernel], body


KINDS = {"conv_transpose2d": (_moves, _render)}
