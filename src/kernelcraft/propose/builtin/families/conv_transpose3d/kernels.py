"""The transposed 3-D conv's kernels and host code: implicit GEMMs over the output phases.

One axis (stride s, padding p, dilation d, k taps): output o = r + s*j of phase r gathers, for tap number i, the
input j + base - i*shift through tap first + i*step, where step = s / gcd(s, d) (the taps that share a phase are
step apart), shift = d*step / s, first the least tap t < s with t*d = r + p (mod s) and base = (r + p - first*d) / s;
a phase has ceil((k - first) / step) taps, none when no t < s solves the congruence or first >= k (possible when
gcd(s, d) > 1 or k < s). Step and shift are the same for every phase. kc_transposed_taps works this out on the host
in plain integers; the one-launch kernel works out `first` itself.

The GEMM of phase (rd, rh, rw): rows are its outputs (n, jd, jh, jw), columns the out-channels of group g, K the
pairs (in-channel c, taps td, th, tw). A tile gathers its A block from x (out-of-range inputs masked to zero) and its
B block from the weight as the module holds it, (C_in, C_out/groups, KD, KH, KW): out-channels strided by
KD*KH*KW, served from L2. Bias and the epilogue are applied to the fp32 accumulator, which is stored once, the
phase's outputs s apart along each axis; the epilogue's parameter operands (x + self.bias, broadcast by torch's
rules) are read at those true output coordinates (od, oh, ow), not the phase's (jd, jh, jw):
families/conv/operands.py. Offsets that scale with the batch or the channels are int64.

The per-phase kernel takes the phase's tap counts as constexprs, so its K decoding divides by constants (a
specialization per distinct count, at most 8 for stride 2); the one-launch kernel puts the phase on grid axis 2,
sized for phase (0, 0, 0), which has the most outputs, and decodes K with run-time counts.
"""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.families.conv import operands, shifted
from kernelcraft.propose.builtin.families.conv.implicit_gemm import TILE  # (tile, group[, phase]) -> rm x rn of group g
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.paths import attr
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.steps import epilogue_lines

AXES = "dhw"
NDIM = 5  # the kernels' output dims, (n, co, od, oh, ow): an epilogue operand's strides

TAPS = '''
def kc_transposed_taps(r, s, p, d, k):
    """The taps of a transposed conv axis (stride s, padding p, dilation d, k taps) that reach its outputs
    o = r + s*j: (first tap, tap step, number of taps, base, shift); output j's input through tap number i is
    j + base - i*shift. Step and shift are the same for every phase r."""
    first = -1
    for t in range(s):
        if first < 0 and (t * d - r - p) % s == 0:
            first = t
    step = 1
    while step * d % s != 0:
        step += 1
    if first < 0 or first >= k:  # no tap reaches these outputs
        return 0, step, 0, 0, step * d // s
    return first, step, (k - first + step - 1) // step, (r + p - first * d) // s, step * d // s
'''


# the phase's GEMM; its taps: first FD/FH/FW, step TD/TH/TW, count ND/NH/NW, input base BD/BH/BW and shift ED/EH/EW
_GEMM = Template('''
n = rm // (ODR * OHR * OWR)
vox = rm % (ODR * OHR * OWR)
jd = vox // (OHR * OWR)
jh = vox // OWR % OHR
jw = vox % OWR
x_row = (n.to(tl.int64) * C + g * CPG) * D * H * W  # volume n, first in-channel of the group
mmask = rm < M
nmask = rn < COPG
acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
for k0 in range(0, K, BLOCK_K):
    kk = k0 + tl.arange(0, BLOCK_K)  # (in-channel c, taps td, th, tw)
    c = kk // (ND * NH * NW)
    td = kk // (NH * NW) % ND
    th = kk // NW % NH
    tw = kk % NW
    id_ = (jd + BD)[:, None] - (td * ED)[None, :]
    ih = (jh + BH)[:, None] - (th * EH)[None, :]
    iw = (jw + BW)[:, None] - (tw * EW)[None, :]
    amask = (mmask[:, None] & (kk < K)[None, :] & (id_ >= 0) & (id_ < D) & (ih >= 0) & (ih < H) & (iw >= 0)
             & (iw < W))
    a = tl.load(x_ptr + x_row[:, None] + (c.to(tl.int64) * D * H * W)[None, :] + (id_ * H + ih) * W + iw,
                mask=amask, other=0.0)
    tap = ((FD + td * TD) * KH + FH + th * TH) * KW + FW + tw * TW
    wk = (g * CPG + c).to(tl.int64) * COPG * KD * KH * KW + tap  # weight (C_in, C_out/groups, KD, KH, KW)
    b = tl.load(w_ptr + wk[:, None] + (rn * KD * KH * KW)[None, :], mask=(kk < K)[:, None] & nmask[None, :],
                other=0.0)
    acc = tl.dot(a, b, acc, input_precision=PREC)
x = acc
if HAS_BIAS:
    x += tl.load(b_ptr + co, mask=nmask, other=0.0).to(tl.float32)[None, :]
od = RD + jd * SD  # the outputs' true coordinates: the phase's are SD, SH, SW apart
oh = RH + jh * SH
ow = RW + jw * SW
$epilogue
out = ((n.to(tl.int64) * CO * OD * OH * OW + (od * OH + oh) * OW + ow)[:, None]
       + (co.to(tl.int64) * OD * OH * OW)[None, :])
tl.store(y_ptr + out, x.to(y_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])
''')

# one axis of the one-launch kernel's phase: its first tap (-1: none), tap count, input base and output count
_PHASE_AXIS = Template('''
F$A = tl.full([], -1, tl.int32)  # the least tap t < S$A with t*D$A = R$A + P$A (mod S$A)
for t in range(0, S$A):
    F$A = tl.where((F$A < 0) & ((t * D$A - R$A - P$A) % S$A == 0), t, F$A)
N$A = tl.where((F$A >= 0) & (F$A < K$A), (K$A - F$A + T$A - 1) // T$A, 0)
B$A = (R$A + P$A - F$A * D$A) // S$A  # exact where the phase has taps
O${A}R = (O$A - R$A + S$A - 1) // S$A
''')

_ALL_PHASES = Template('''
# program (tile, group, phase): the phase's taps worked out here (steps TD, TH, TW and shifts ED, EH, EW hold for
# every phase)
RD = tl.program_id(2) // (SH * SW)
RH = tl.program_id(2) // SW % SH
RW = tl.program_id(2) % SW
$axes
M = NB * ODR * OHR * OWR
K = CPG * ND * NH * NW
ND = tl.maximum(ND, 1)  # K == 0 already says no tap; keeps the index math defined
NH = tl.maximum(NH, 1)
NW = tl.maximum(NW, 1)
if tl.program_id(0) >= tl.cdiv(M, BLOCK_M) * tl.cdiv(COPG, BLOCK_N):  # the grid is sized for the largest phase
    return
$tile
$gemm
''')

_COMMON = ("x_ptr", "w_ptr", "b_ptr", "y_ptr")  # then the epilogue's operands (operands.params)
_OPTIONS = ("HAS_BIAS", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "PREC")
# the per-axis numbers the kernels take, each for D, H and W: the per-phase kernel the phase and its taps (R, S, F,
# T, B, E), the one-launch kernel the stride, padding, dilation, tap step and input shift (S, P, D, T, E). The host
# passes its variables of the same letters in lower case (rd, rh, rw, sd, ...)
_PHASE_NUMBERS, _AXIS_NUMBERS = "RSFTBE", "SPDTE"


def _per_axis(letters: str) -> list[str]:
    return [f"{v}{a}" for v in letters for a in AXES.upper()]


def _per_phase(op: Op, names: Names, epilogue: str, scalars: Scalars) -> TritonKernel:
    params = (*_COMMON, *operands.params(op, NDIM), "M", "C", "D", "H", "W", "CO", "OD", "OH", "OW", "ODR", "OHR",
              "OWR", "K", "CPG", "COPG", "KD", "KH", "KW", *_per_axis(_PHASE_NUMBERS))
    body = TILE + "\n" + _GEMM.substitute(epilogue=epilogue).strip("\n")
    constexprs = ("ND", "NH", "NW", *_OPTIONS, *operands.flags(op))
    return TritonKernel(names("kc_conv_transpose3d_kernel"), params, constexprs, body, scalars,
                        "program (tile, group) of phase (RD, RH, RW): its outputs x the out-channels of one group")


def _all_phases(op: Op, names: Names, epilogue: str, scalars: Scalars) -> TritonKernel:
    params = (*_COMMON, *operands.params(op, NDIM), "NB", "C", "D", "H", "W", "CO", "OD", "OH", "OW", "CPG", "COPG",
              "KD", "KH", "KW", *_per_axis(_AXIS_NUMBERS))
    axes = "\n".join(_PHASE_AXIS.substitute(A=a).strip("\n") for a in "DHW")
    body = _ALL_PHASES.substitute(axes=axes, tile=TILE,
                                  gemm=_GEMM.substitute(epilogue=epilogue).strip("\n"))
    return TritonKernel(names("kc_conv_transpose3d_phases_kernel"), params, (*_OPTIONS, *operands.flags(op)), body,
                        scalars, "program (tile, group, phase): every phase of the transposed conv in one launch")


def _hyper(d: dict) -> str:
    """Lines binding the hyper-parameters: read from the module at run time when the op names one, else the values
    the reference passed (groups by attribute when forward reads it from one)."""
    names = {"stride": "s", "padding": "p", "output_padding": "op", "dilation": "d"}
    if d.get("module"):
        conv = attr(d["module"])
        lines = [f"({', '.join(v + a for a in AXES)},) = {conv}.{k}" for k, v in names.items()]
        return "\n".join(lines + [f"groups = {conv}.groups"])
    groups = attr(d["groups_attr"]) if d.get("groups_attr") else int(d["groups"])
    lines = [f"({', '.join(v + a for a in AXES)},) = {tuple(int(u) for u in d[k])}" for k, v in names.items()]
    return "\n".join(lines + [f"groups = {groups}"])


_BODY = Template('''
w, bias = $weight, $bias
unbatched = x.dim() == 4
if unbatched:
    x = x.reshape(1, *x.shape)
N, C, D, H, W = x.shape
CI, COPG, KD, KH, KW = w.shape
$hyper
if C != CI or C % groups:
    raise ValueError(f"an input of {C} channels for a transposed conv of {CI} in-channels in {groups} groups")
OD = (D - 1) * sd - 2 * pd + dd * (KD - 1) + opd + 1
OH = (H - 1) * sh - 2 * ph + dh * (KH - 1) + oph + 1
OW = (W - 1) * sw - 2 * pw + dw * (KW - 1) + opw + 1
CO, CPG = COPG * groups, C // groups
y = torch.empty((N, CO, max(OD, 0), max(OH, 0), max(OW, 0)), dtype=x.dtype, device=x.device)
${operands}if y.numel() > 0:
    w = w.contiguous()
    bn = min($block_n, max(16, triton.next_power_of_2(COPG)))
    prec = "$precision" if x.dtype == torch.float32 else "ieee"  # fp16/bf16 take the tensor cores as they are
$launch
return y.reshape(y.shape[1:]) if unbatched else y
''')

_PER_PHASE_LAUNCH = Template('''
for rd in range(min(sd, OD)):  # one launch per output phase (rd, rh, rw)
    fd, td, nd, bd, ed = kc_transposed_taps(rd, sd, pd, dd, KD)
    for rh in range(min(sh, OH)):
        fh, th, nh, bh, eh = kc_transposed_taps(rh, sh, ph, dh, KH)
        for rw in range(min(sw, OW)):
            fw, tw, nw, bw, ew = kc_transposed_taps(rw, sw, pw, dw, KW)
            ODR, OHR, OWR = (OD - rd + sd - 1) // sd, (OH - rh + sh - 1) // sh, (OW - rw + sw - 1) // sw
            M, K = N * ODR * OHR * OWR, CPG * nd * nh * nw  # K == 0: no tap reaches this phase, bias only
            grid = (triton.cdiv(M, $block_m) * triton.cdiv(COPG, bn), groups)
            $launch
''')

_ALL_PHASES_LAUNCH = Template('''
_, td, _, _, ed = kc_transposed_taps(0, sd, pd, dd, KD)  # tap steps and input shifts: the same for every phase
_, th, _, _, eh = kc_transposed_taps(0, sh, ph, dh, KH)
_, tw, _, _, ew = kc_transposed_taps(0, sw, pw, dw, KW)
M0 = N * triton.cdiv(OD, sd) * triton.cdiv(OH, sh) * triton.cdiv(OW, sw)  # phase (0, 0, 0) has the most outputs
grid = (triton.cdiv(M0, $block_m) * triton.cdiv(COPG, bn), groups, sd * sh * sw)
$launch
''')


def render(op: Op, p, names: Names) -> Rendered:
    d = op.detail
    epilogue = "\n".join(epilogue_lines(d.get("steps") or [], lambda k: operands.tile_load(k, ("od", "oh", "ow"))))
    scalars = Scalars.of(op)  # the numbers the steps read from the module: the kernel's first parameters
    consts = {"HAS_BIAS": "bias is not None", "BLOCK_M": int(p.BLOCK_M), "BLOCK_N": "bn", "BLOCK_K": int(p.BLOCK_K),
              "GROUP_M": int(p.GROUP_M), "PREC": "prec", **operands.flag_consts(op)}
    options = {"num_warps": int(p.num_warps), "num_stages": int(p.num_stages)}
    common = ["x", "w", "x if bias is None else bias", "y", *operands.args(op, NDIM)]
    if p.one_launch:
        kernel = _all_phases(op, names, epilogue, scalars)
        args = [*common, "N", "C", "D", "H", "W", "CO", "OD", "OH", "OW", "CPG", "COPG", "KD", "KH", "KW",
                *(v.lower() for v in _per_axis(_AXIS_NUMBERS))]
        launch = _ALL_PHASES_LAUNCH.substitute(block_m=int(p.BLOCK_M),
                                               launch=kernel.launch("grid", args, consts, **options))
    else:
        kernel = _per_phase(op, names, epilogue, scalars)
        args = [*common, "M", "C", "D", "H", "W", "CO", "OD", "OH", "OW", "ODR", "OHR", "OWR", "K", "CPG", "COPG",
                "KD", "KH", "KW", *(v.lower() for v in _per_axis(_PHASE_NUMBERS))]
        per_phase = {"ND": "max(nd, 1)", "NH": "max(nh, 1)", "NW": "max(nw, 1)", **consts}
        launch = _PER_PHASE_LAUNCH.substitute(block_m=int(p.BLOCK_M),
                                              launch=kernel.launch("grid", args, per_phase, **options))
    blocks = (TAPS, kernel)
    if p.as_conv:
        launch, route = conv_route(op, names, launch, epilogue, p.compiled_sizes)
        blocks = (*route, *blocks)
    body = _BODY.substitute(weight=attr(d["weight"]), bias=attr(d["bias"]) if d.get("bias") else "None",
                            hyper=_hyper(d), block_n=int(p.BLOCK_N), precision=p.precision,
                            operands=_operand_lines(op),
                            launch=indent(launch.strip("\n"), 4))
    return Rendered((*blocks, operands.HELPER) if operands.count(op) else blocks, body)


def conv_route(op: Op, names: Names, phases: str, epilogue: str, compiled: bool = False) -> tuple[str, tuple]:
    """The launch lines of an as_conv move: where stride is 1, output padding 0, one group and padding at most
    dilation * (k - 1), the plain conv the transposed one equals (the weight (C_in, C_out, KD, KH, KW) as (C_out,
    C_in, ...), its taps flipped, padded dilation * (k - 1) - padding: the same output size) by the shifted-rows GEMM
    where that applies (conv/shifted.py; `epilogue`: the phases' epilogue lines, which read the same coordinates;
    `compiled`: its sizes compiled in); else the lines `phases`. And the blocks the shifted GEMM needs."""
    rows = shifted.kernel(AXES, names, operands.params(op, NDIM), operands.flags(op), epilogue, Scalars.of(op),
                          compiled)
    split = shifted.split_kernel(AXES, names)
    lines = f'''qd, qh, qw = dd * (KD - 1) - pd, dh * (KH - 1) - ph, dw * (KW - 1) - pw  # the conv's padding
if (opd, oph, opw) == (0, 0, 0) and min(qd, qh, qw) >= 0 and {shifted.applies(AXES, "q")}:
    # the conv it equals: w as (CO, C, KD, KH, KW) (one group), its taps flipped
    w = w.transpose(0, 1).flip(2, 3, 4).contiguous()
{indent(shifted.lines(AXES, rows, split, operands.args(op, NDIM), operands.flag_consts(op), pad="q"), 4)}
else:  # the per-phase GEMMs
{indent(phases.strip(chr(10)), 4)}'''
    return lines, (*shifted.BLOCKS, split, rows)


def _operand_lines(op: Op) -> str:
    """The forward's lines binding each epilogue operand and its strides over the kernels' (n, co, od, oh, ow)."""
    return operands.lines(op, "([] if unbatched else [N]) + [CO, OD, OH, OW]",
                          "([] if unbatched else [0]) + [1, 2, 3, 4]", NDIM)
