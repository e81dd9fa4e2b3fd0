"""Transposed 2-D convolution family (nn.ConvTranspose2d / F.conv_transpose2d, any stride, padding,
output_padding, dilation and groups, with a pointwise epilogue; nn.ConvTranspose1d as a one-row 2-D one): a sub-pixel (phase) decomposition into implicit
GEMMs that gather.

Input pixel ih feeds output oh = ih*s - p + kh*d, so an output gathers the inputs ih = (oh + p - kh*d) / s for
the taps kh where that division is exact. Which taps those are depends only on the output's phase oh mod s: for
phase r they are kh = f, f + t, f + 2t, ... (t = s / gcd(s, d), f the first solution of kh*d = r + p mod s, none
for some phases when gcd(s, d) > 1), and along the phase's outputs oh = r + s*j the input is ih = j + base - tap*e
(base = (r + p - f*d) / s, e = d*t / s): a dense, stride-1 convolution over only the taps that contribute. So
each phase (rh, rw) is one launch of an implicit GEMM with M = N * (outputs of the phase), N = the out-channels of
a group, K = (in-channels of a group) * (its taps): no zero-inserted input, no MAC on a tap that cannot reach,
and stride 1 is the plain gather formulation (one phase, every tap). A phase no tap reaches gets bias and the
epilogue only (K = 0). The host works out each phase's taps with kc_phase_taps, in plain integers, and the tap
counts are constants of the kernel. The one-launch moves put the phase on a grid axis instead and work its taps
out in the kernel: one launch (and one tail wave) for all stride_h*stride_w phases, at the price of run-time tap
counts in the K decoding.

Weights stay as the module holds them, (C_in, C_out/groups, KH, KW): the B tile is gathered (out-channels
strided by KH*KW), served from L2. Outputs of a phase are stored s apart along W.
"""

from __future__ import annotations

from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.codegen import attr, indent
from kernelcraft.propose.builtin.triton_families.conv import TILE, conv_moves, hyper_lines, precision
from kernelcraft.propose.builtin.steps import step_lines


def _moves(op: Op) -> list[tuple]:
    out = conv_moves(op, "Sub-pixel decomposition: one implicit GEMM per output phase (oh, ow mod stride) over only "
                         "the taps that reach it, inputs gathered straight from x (no zero-inserted buffer)",
                     gemm="implicit GEMM per output phase")
    one = ("All output phases in one launch (the phase a grid axis, its taps worked out in the kernel): no launch "
           "and tail wave per phase; 128x128 tiles, 16-wide K steps, 8 warps, 3 stages, ")
    params = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 16, "GROUP_M": 8, "num_warps": 8, "num_stages": 3,
              "one_launch": True}
    at = next(i for i, (_, _, p) in enumerate(out) if p["precision"] == "tf32")  # before the relaxed-only moves
    out[at:at] = [(one + "3xTF32 tensor cores at fp32 accuracy", "parallelism", {**params, "precision": "tf32x3"}),
                  (one + "exact fp32 on the FMA units", "parallelism", {**params, "precision": "ieee"})]
    return out


_PHASE_TAPS = '''
def kc_phase_taps(r, s, p, d, k):
    """The taps of a transposed conv axis (stride s, padding p, dilation d, k taps) that reach the outputs
    o = r + s*j: (first tap, tap step, number of taps, base, shift), the input of output j and tap number i being
    j + base - i*shift. Step and shift are the same for every phase."""
    first = -1
    for t in range(s):
        if first < 0 and (t * d - r - p) % s == 0:
            first = t
    step = 1
    while step * d % s != 0:
        step += 1
    if first < 0 or first >= k:  # no tap reaches these outputs (step and shift hold for every phase)
        return 0, step, 0, 0, step * d // s
    return first, step, (k - first + step - 1) // step, (r + p - first * d) // s, step * d // s
'''


_PER_PHASE = '''
@triton.jit
def kc_conv_transpose2d_kernel(${scalars}x_ptr, w_ptr, b_ptr, y_ptr, M, C, H, W, CO, OH, OW, OHR, OWR, K, CPG, COPG, KH, KW,
                               RH, RW, SH, SW, FH, FW, TH, TW, BH, BW, EH, EW, NH: tl.constexpr, NW: tl.constexpr,
                               HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PREC: tl.constexpr):
    # program (tile, group) of phase (RH, RW): outputs rm (n, jh, jw) at (RH + jh*SH, RW + jw*SW) x out-channels co
$tile
$gemm'''


_ALL_PHASES = '''
@triton.jit
def kc_first_tap(r, s, p, d):
    # the first tap t in [0, s) with t*d = r + p (mod s), or -1: where a phase's taps start
    first = tl.full([], -1, tl.int32)  # a tensor from the start: it is carried through the loop
    for t in range(0, s):
        first = tl.where((first < 0) & ((t * d - r - p) % s == 0), t, first)
    return first


@triton.jit
def kc_conv_transpose2d_phases_kernel(${scalars}x_ptr, w_ptr, b_ptr, y_ptr, N, C, H, W, CO, OH, OW, CPG, COPG, KH, KW, SH, SW,
                                      PH, PW, DH, DW, TH, TW, EH, EW, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr,
                                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                                      PREC: tl.constexpr):
    # program (tile, group, phase): the phase's taps worked out here (TH, TW, EH, EW are the same for all phases)
    RH = tl.program_id(2) // SW
    RW = tl.program_id(2) % SW
    FH = kc_first_tap(RH, SH, PH, DH)
    FW = kc_first_tap(RW, SW, PW, DW)
    NH = tl.where((FH >= 0) & (FH < KH), (KH - FH + TH - 1) // TH, 0)
    NW = tl.where((FW >= 0) & (FW < KW), (KW - FW + TW - 1) // TW, 0)
    BH = (RH + PH - FH * DH) // SH  # exact where the phase has taps
    BW = (RW + PW - FW * DW) // SW
    OHR = (OH - RH + SH - 1) // SH
    OWR = (OW - RW + SW - 1) // SW
    M = N * OHR * OWR
    K = CPG * NH * NW
    NH = tl.maximum(NH, 1)  # K == 0 already says no tap; keeps the index math below defined
    NW = tl.maximum(NW, 1)
    if tl.program_id(0) >= tl.cdiv(M, BLOCK_M) * tl.cdiv(COPG, BLOCK_N):  # the grid is sized for the largest phase
        return
$tile
$gemm'''


_GEMM = '''    n = rm // (OHR * OWR)
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


def _kernel(template: str, steps: str) -> str:
    return template.replace("$tile", TILE).replace("$gemm", _GEMM.strip("\n")).replace("$steps", steps)


def _render(op: Op, p: dict) -> tuple[list[str], str]:
    d = op.detail
    bm, bn, bk, group = int(p["BLOCK_M"]), int(p["BLOCK_N"]), int(p["BLOCK_K"]), int(p["GROUP_M"])
    prec = precision(p)
    steps = indent("\n".join(step_lines(d.get("steps", []))), 4)
    s = Scalars.of(op)  # the numbers the steps read from the module: the kernel's first parameters
    one_launch = bool(p.get("one_launch"))
    bias = attr(d["bias"]) if d.get("bias") else "None"
    one_d = op.kind == "conv_transpose1d"  # a one-row 2-D one: x (N, C, 1, L), w (C_in, C_out/groups, 1, K)
    names = ("stride", "padding", "output_padding", "dilation")
    if one_d and d.get("module"):  # the 1-D module's hyper-parameters at run time, lifted
        m = attr(d["module"])
        hyper = (f"(sh, sw), (ph, pw), (oph, opw), (dh, dw), groups = (1, *{m}.stride), (0, *{m}.padding), "
                 f"(0, *{m}.output_padding), (1, *{m}.dilation), {m}.groups")
    else:
        hyper = hyper_lines(d, names, "hw", padding_strings=False)
    one_row = ("\nx = x.reshape(x.shape[0], x.shape[1], 1, x.shape[2])  # (N, C, L) as one-row images"
               "\nw = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])") if one_d else ""
    body = f'''
w, bias = {attr(d["weight"])}, {bias}
unbatched = x.dim() == {3 - one_d}
if unbatched:
    x = x.reshape(1, *x.shape){one_row}
N, C, H, W = x.shape
CI, COPG, KH, KW = w.shape
{hyper}
OH = (H - 1) * sh - 2 * ph + dh * (KH - 1) + oph + 1
OW = (W - 1) * sw - 2 * pw + dw * (KW - 1) + opw + 1
CO, CPG = COPG * groups, C // groups
y = torch.empty((N, CO, max(OH, 0), max(OW, 0)), dtype=x.dtype, device=x.device)
if y.numel() > 0:
    w = w.contiguous()
    bn = min({bn}, max(16, triton.next_power_of_2(COPG)))
    prec = "{prec}" if x.dtype == torch.float32 else "ieee"  # fp16/bf16 take the tensor cores as they are
$launch
{"y = y.reshape(y.shape[0], y.shape[1], y.shape[3])" + chr(10) if one_d else ""}return y.reshape(y.shape[1:]) if unbatched else y'''
    per_phase = f'''
    for rh in range(min(sh, OH)):  # one launch per output phase (rh, rw)
        fh, th, nh, bh, eh = kc_phase_taps(rh, sh, ph, dh, KH)
        for rw in range(min(sw, OW)):
            fw, tw, nw, bw, ew = kc_phase_taps(rw, sw, pw, dw, KW)
            OHR, OWR = (OH - rh + sh - 1) // sh, (OW - rw + sw - 1) // sw
            M, K = N * OHR * OWR, CPG * nh * nw  # K == 0: no tap reaches this phase, bias only
            grid = (triton.cdiv(M, {bm}) * triton.cdiv(COPG, bn), groups)
            kc_conv_transpose2d_kernel[grid](
                {s.params}x, w, x if bias is None else bias, y, M, C, H, W, CO, OH, OW, OHR, OWR, K, CPG, COPG, KH, KW,
                rh, rw, sh, sw, fh, fw, th, tw, bh, bw, eh, ew, NH=max(nh, 1), NW=max(nw, 1),
                HAS_BIAS=bias is not None, BLOCK_M={bm}, BLOCK_N=bn, BLOCK_K={bk}, GROUP_M={group},
                PREC=prec, num_warps={int(p["num_warps"])}, num_stages={int(p["num_stages"])})'''
    all_phases = f'''
    _, th, _, _, eh = kc_phase_taps(0, sh, ph, dh, KH)  # tap step and input shift: the same for every phase
    _, tw, _, _, ew = kc_phase_taps(0, sw, pw, dw, KW)
    M0 = N * triton.cdiv(OH, sh) * triton.cdiv(OW, sw)  # phase (0, 0) has the most outputs
    grid = (triton.cdiv(M0, {bm}) * triton.cdiv(COPG, bn), groups, sh * sw)
    kc_conv_transpose2d_phases_kernel[grid](
        {s.params}x, w, x if bias is None else bias, y, N, C, H, W, CO, OH, OW, CPG, COPG, KH, KW, sh, sw, ph, pw, dh,
        dw, th, tw, eh, ew, HAS_BIAS=bias is not None, BLOCK_M={bm}, BLOCK_N=bn, BLOCK_K={bk}, GROUP_M={group},
        PREC=prec, num_warps={int(p["num_warps"])}, num_stages={int(p["num_stages"])})'''
    body = body.replace("$launch", (all_phases if one_launch else per_phase).strip("\n"))
    kernel = s.fill(_kernel(_ALL_PHASES if one_launch else _PER_PHASE, steps))
    return [_PHASE_TAPS, kernel], body


KINDS = {"conv_transpose2d": (_moves, _render), "conv_transpose1d": (_moves, _render)}
