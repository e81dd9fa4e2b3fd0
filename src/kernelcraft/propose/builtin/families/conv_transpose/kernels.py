"""The transposed-conv family's kernels and forward: a launch per output phase (`per_phase`, the phase's taps
worked out on the host by kc_phase_taps, its tap counts constants of the kernel), or one launch for all phases
(`all_phases`, the phase and the tile on grid axis 0, the phase fastest, its taps worked out in the kernel by
kc_first_tap). Both kernels are one template: the swizzled tile prologue and the phase's implicit GEMM (`_GEMM`)
after their own phase set-up, with a packed (channel, tap) K loop or the taps K loop (`_PACKED_K`, `_TAPS_K`; the
forward picks per call). The epilogue's parameter operands are read at the outputs' true coordinates (oh, ow), not the phase's (jh, jw):
families/conv/operands.py."""

from __future__ import annotations

import inspect
from string import Template

from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.families.conv import kernels as conv_kernels
from kernelcraft.propose.builtin.families.conv import operands, shifted
from kernelcraft.propose.builtin.families.conv.implicit_gemm import TILE, hyper_lines, taps_loop, tile_prologue
from kernelcraft.propose.builtin.family import Block, Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.paths import attr
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.steps import epilogue_lines

NDIM = 4  # the kernels' output dims, (n, co, oh, ow): an epilogue operand's strides
# A taps move runs the taps K loop where a group has this many BLOCK_K chunks of in-channels or more; with fewer,
# the packed (channel, tap) K loop in PACKED_K-wide steps, the first packed move's (one chunk ran slower: evidence.py).
TAPS_MIN_CHUNKS = 2
# A short_one_launch move runs every phase in one launch where an output's share of the phases' GEMMs is short beside
# its store: CPG times an output's mean taps (its K, averaged over the phases) at most SHORT_PHASES channel tiles
# (BLOCK_N-wide). Where the K loop is short the launch per phase is bound by its stores, s apart, each phase's partial
# lines of y written back to memory before the next phase fills them; one launch fills them together (all_phases).
# Where one launch won and lost: evidence.py.
SHORT_PHASES = 1.0
PACKED_K = 16
# An as_conv move with the taps K order takes the plain conv on its packed implicit GEMM (not on the shifted rows,
# which it takes wherever they apply) where input planes (H * W) have AS_CONV_PLANES[0] elements or more and, where a
# group's in-channels would run the taps loop, AS_CONV_PLANES[1] or more; else the phases (evidence.py)
AS_CONV_PLANES = (2 ** 16, 2 ** 18)


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


def kc_mean_taps(s, p, d, k):
    """The taps an output of a transposed conv axis (stride s, padding p, dilation d, k taps) gets, averaged over the
    axis' s phases."""
    taps = 0
    for r in range(s):
        taps += kc_phase_taps(r, s, p, d, k)[2]
    return taps / s


# The phase's implicit GEMM: outputs rm (n, jh, jw) of phase (RH, RW) x out-channels co, K the phase's (channel,
# tap th, tap tw) in one of two orders ($kloop: _PACKED_K or _TAPS_K, the rest shared)
_GEMM = Template('''n = rm // (OHR * OWR)
pix = rm % (OHR * OWR)
jh = pix // OWR
jw = pix % OWR
ih0 = jh + BH
iw0 = jw + BW
x_row = (n.to(tl.int64) * C + g * CPG) * H * W  # start of image n, first channel of the group
mmask = (rm < M)$inside
nmask = rn < COPG
acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
$kloop
x = acc
if HAS_BIAS:
    x += tl.load(b_ptr + co, mask=nmask, other=0.0).to(tl.float32)[None, :]
oh = RH + jh * SH  # the outputs' true coordinates: the phase's are SH, SW apart
ow = RW + jw * SW
$epilogue
out = (n.to(tl.int64) * CO * OH * OW + oh * OW + ow)[:, None] + (co.to(tl.int64) * OH * OW)[None, :]
tl.store(y_ptr + out, x.to(y_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])''')

# K = (channel c, tap th, tap tw) packed: each step decodes its K indices and gathers a 2-D patch; the weight as the
# module holds it, (C_in, C_out/groups, KH, KW), its out-channels KH*KW apart (served from L2).
_PACKED_K = '''for k0 in range(0, K, BLOCK_K):
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
    acc = tl.dot(a, b, acc, input_precision=PREC)'''

# K = the phase's taps (its NH x NW, K // CPG of them: none where K == 0) x the group's in-channels in BLOCK_K chunks
# (implicit_gemm.taps_loop, the conv family's loop): the phase's tap number `tap` is (th, tw) = (tap // NW, tap % NW),
# its input ih0 - th*EH, iw0 - tw*EW and its weight the kernel's tap (FH + th*TH, FW + tw*TW) of w as (CO, KH, KW,
# CPG), permuted by the forward. Only the phase's taps are walked: the host worked them out (kc_phase_taps).
_TAPS_K = taps_loop("(K // CPG)", (("ih", "ih0 - tap // NW * EH", "H"), ("iw", "iw0 - tap % NW * EW", "W")),
                    "cin * H * W", "ih * W + iw", w_row="KH * KW * CPG",
                    w_tap="((FH + tap // NW * TH) * KW + FW + tap % NW * TW)", tap_note="the phase's tap number")

_KERNEL = Template('''
$phase
$tile
$gemm''')

_PER_PHASE = ("# program (tile, group) of phase (RH, RW): outputs rm (n, jh, jw) at (RH + jh*SH, RW + jw*SW) x "
              "out-channels co")

# The one-launch kernel's programs: (phase, tile) on grid axis 0, the phase fastest, so the programs running together
# compute every phase of the same tile of rows (n, jh, jw): each stores its phase's outputs SH, SW apart, and together
# they fill the same lines of y while those are in L2, which then writes each line once. (With the phase on a grid axis
# of its own, each phase's programs swept all of y in turn: every line of y was written back once a phase, partly.)
# All phases decode their rows on phase (0, 0)'s grid of OHR x OWR (the most outputs), a phase's rows past its own
# LH x LW outputs masked, so tile t is the same (n, jh, jw) rows in every phase.
_ALL_PHASES = '''# program (phase, tile) and group: the phase's taps worked out here (TH, TW, EH, EW: the same for all phases)
RH = tl.program_id(0) % (SH * SW) // SW
RW = tl.program_id(0) % SW
FH = kc_first_tap(RH, SH, PH, DH)
FW = kc_first_tap(RW, SW, PW, DW)
NH = tl.where((FH >= 0) & (FH < KH), (KH - FH + TH - 1) // TH, 0)
NW = tl.where((FW >= 0) & (FW < KW), (KW - FW + TW - 1) // TW, 0)
BH = (RH + PH - FH * DH) // SH  # exact where the phase has taps
BW = (RW + PW - FW * DW) // SW
LH = (OH - RH + SH - 1) // SH  # the phase's outputs along H and W
LW = (OW - RW + SW - 1) // SW
OHR = (OH + SH - 1) // SH  # the rows' grid: phase (0, 0)'s, the same for every phase
OWR = (OW + SW - 1) // SW
M = N * OHR * OWR
K = CPG * NH * NW
NH = tl.maximum(NH, 1)  # K == 0 already says no tap; keeps the index math below defined
NW = tl.maximum(NW, 1)'''

# A device function of the one-launch kernel, the same for every op (one name, emitted once in a chain)
FIRST_TAP = TritonKernel("kc_first_tap", ("r", "s", "p", "d"), (), '''
# the first tap t in [0, s) with t*d = r + p (mod s), or -1: where a phase's taps start
first = tl.full([], -1, tl.int32)  # a tensor from the start: it is carried through the loop
for t in range(0, s):
    first = tl.where((first < 0) & ((t * d - r - p) % s == 0), t, first)
return first''')

_COMMON = ("HAS_BIAS", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "PREC")


def per_phase(op: Op, names: Names, taps: bool = False) -> TritonKernel:
    """The kernel of one phase's launch (`taps`: the taps K loop, over w as (CO, KH, KW, CPG); else the packed one,
    over w as the module holds it); both take the same parameters."""
    return TritonKernel(
        names("kc_conv_transpose2d_taps_kernel" if taps else "kc_conv_transpose2d_kernel"),
        ("x_ptr", "w_ptr", "b_ptr", "y_ptr", *operands.params(op, NDIM), "M", "C", "H", "W", "CO", "OH", "OW", "OHR",
         "OWR", "K", "CPG", "COPG", "KH", "KW", "RH", "RW", "SH", "SW", "FH", "FW", "TH", "TW", "BH", "BW", "EH", "EW"),
        ("NH", "NW", *_COMMON, *operands.flags(op)), _body(op, False, taps), Scalars.of(op))


def all_phases(op: Op, names: Names, taps: bool = False) -> TritonKernel:
    """The one-launch kernel (`taps` as per_phase's)."""
    return TritonKernel(
        names("kc_conv_transpose2d_phases_taps_kernel" if taps else "kc_conv_transpose2d_phases_kernel"),
        ("x_ptr", "w_ptr", "b_ptr", "y_ptr", *operands.params(op, NDIM), "N", "C", "H", "W", "CO", "OH", "OW", "CPG",
         "COPG", "KH", "KW", "SH", "SW", "PH", "PW", "DH", "DW", "TH", "TW", "EH", "EW"),
        (*_COMMON, *operands.flags(op)), _body(op, True, taps), Scalars.of(op))


def _body(op: Op, one: bool, taps: bool) -> str:
    """A kernel's body: the one-launch kernel's (`one`: its phase and tile share grid axis 0, its rows masked to the
    phase's LH x LW outputs) or a phase's launch's."""
    epilogue = epilogue_lines(op.detail.get("steps") or [], lambda k: operands.tile_load(k, ("oh", "ow")))
    gemm = _GEMM.substitute(kloop=_TAPS_K if taps else _PACKED_K, epilogue="\n".join(epilogue),
                            inside=" & (jh < LH) & (jw < LW)" if one else "")
    return _KERNEL.substitute(phase=_ALL_PHASES if one else _PER_PHASE,
                              tile=tile_prologue("tl.program_id(0) // (SH * SW)") if one else TILE, gemm=gemm)


def _operand_lines(op: Op) -> str:
    """The forward's lines binding each epilogue operand and its strides over the kernels' (n, co, oh, ow)."""
    one_d = op.kind == "conv_transpose1d"
    return operands.lines(op, f"([] if unbatched else [N]) + [CO] + {'[]' if one_d else '[OH]'} + [OW]",
                          f"([] if unbatched else [0]) + {'[1, 3]' if one_d else '[1, 2, 3]'}", NDIM)


def _hyper(op: Op) -> str:
    """The forward's lines binding stride, padding, output_padding, dilation (h, w) and groups; a 1-D module's read
    at run time and lifted to a one-row 2-D conv's."""
    d = op.detail
    if op.kind == "conv_transpose1d" and d.get("module"):
        m = attr(d["module"])
        return (f"(sh, sw), (ph, pw), (oph, opw), (dh, dw), groups = (1, *{m}.stride), (0, *{m}.padding), "
                f"(0, *{m}.output_padding), (1, *{m}.dilation), {m}.groups")
    return hyper_lines(d, ("stride", "padding", "output_padding", "dilation"), "hw", padding_strings=False)


def conv_route(op: Op, names: Names, phases: str, consts: dict, options: dict, taps_chunk: int = 0,
               compiled: bool = False) -> tuple[str, tuple[Block, ...]]:
    """The forward's launch lines of an as_conv move: where stride is 1, output padding 0 and padding at most
    dilation * (k - 1), the plain conv the transposed one equals: the weight (C_in, C_out/groups, KH, KW) as (C_out,
    C_in/groups, KH, KW), its taps flipped, padded dilation * (k - 1) - padding (the same output size), run by the
    conv family's shifted-rows GEMM where that applies (conv/shifted.py: fp32 at 3xTF32 on a Hopper GPU, one group,
    more than one tap), else by its packed implicit GEMM; else the lines `phases`. And the blocks those need.
    `taps_chunk` (the phases' taps loop's BLOCK_K; 0: packed phases) adds the plane rule of AS_CONV_PLANES to the
    packed GEMM's route (the shifted one beat the phases' taps loop on planes of every size); `compiled`: the shifted
    kernel's sizes compiled in (shifted.kernel)."""
    conv = conv_kernels.gemm_kernel(op, names)
    rows = shifted.kernel("hw", names, operands.params(op, NDIM), operands.flags(op),
                          "\n".join(epilogue_lines(op.detail.get("steps") or [], conv_kernels.gemm_load)),
                          Scalars.of(op), compiled=compiled)
    split = shifted.split_kernel("hw", names)
    args = operands.args(op, NDIM)
    run = conv.launch("grid", ["x", "w", "x if bias is None else bias", "y", *args, "M", "C", "H", "W", "CO", "OH",
                               "OW", "K", "CPG", "COPG", "1", "1", "qh", "qw", "dh", "dw"],
                      {"KH": "KH", "KW": "KW", **consts}, **options)
    small, large = AS_CONV_PLANES
    planes = (f" and H * W >= {small} and (H * W >= {large} or CPG < {TAPS_MIN_CHUNKS * taps_chunk})"
              if taps_chunk else "")
    lines = f'''qh, qw = dh * (KH - 1) - ph, dw * (KW - 1) - pw  # the padding of the conv it equals
as_conv = (sh, sw) == (1, 1) and (oph, opw) == (0, 0) and qh >= 0 and qw >= 0
rows_ok = as_conv and {shifted.applies("hw", "q")}
if rows_ok or (as_conv{planes}):
    # the conv it equals: w as (CO, CPG, KH, KW), each group's in- and out-channels swapped, its taps flipped
    w = w.reshape(groups, CPG, COPG, KH, KW).transpose(1, 2).flip(3, 4).reshape(CO, CPG, KH, KW).contiguous()
    if rows_ok:
{indent(shifted.lines("hw", rows, split, args, operands.flag_consts(op), pad="q"), 8)}
    else:  # the conv family's packed implicit GEMM
        M, K = N * OH * OW, CPG * KH * KW
        grid = (triton.cdiv(M, {consts["BLOCK_M"]}) * triton.cdiv(COPG, bn), groups)
        {run}
else:  # the per-phase GEMMs
{indent(phases.strip(chr(10)), 4)}'''
    return lines, (*shifted.BLOCKS, split, rows, conv)


def render(op: Op, p, names: Names) -> Rendered:
    """conv_transpose2d / conv_transpose1d on tiles `p` (the family's ConvTransposeTiles)."""
    d = op.detail
    bm, bn, bk, group = int(p.BLOCK_M), int(p.BLOCK_N), int(p.BLOCK_K), int(p.GROUP_M)
    consts = {"HAS_BIAS": "bias is not None", "BLOCK_M": bm, "BLOCK_N": "bn", "BLOCK_K": bk, "GROUP_M": group,
              "PREC": "prec", **operands.flag_consts(op)}
    options = {"num_warps": int(p.num_warps), "num_stages": int(p.num_stages)}
    common = ["x", "w", "x if bias is None else bias", "y", *operands.args(op, NDIM)]  # the epilogue's operands last

    def phases(one: bool) -> tuple[str, tuple[Block, ...]]:
        """The forward's lines running the phases in one launch (`one`) or a launch each, and their blocks."""
        make, launch_consts = (all_phases if one else per_phase), dict(consts)

        def launch(kernel: TritonKernel) -> str:
            if one:
                return kernel.launch("grid", [*common, "N", "C", "H", "W", "CO", "OH", "OW", "CPG", "COPG", "KH", "KW",
                                              "sh", "sw", "ph", "pw", "dh", "dw", "th", "tw", "eh", "ew"],
                                     launch_consts, **options)
            return kernel.launch("grid", [*common, "M", "C", "H", "W", "CO", "OH", "OW", "OHR", "OWR", "K", "CPG",
                                          "COPG", "KH", "KW", "rh", "rw", "sh", "sw", "fh", "fw", "th", "tw", "bh",
                                          "bw", "eh", "ew"],
                                 {"NH": "max(nh, 1)", "NW": "max(nw, 1)", **launch_consts}, **options)

        packed = make(op, names)
        run, kernels = launch(packed), (packed,)
        if p.k_order == "taps":  # the taps K loop where a group's in-channels fill chunks; fewer: the packed K
            taps = make(op, names, taps=True)
            kernels += (taps,)
            taps_run = launch(taps)
            launch_consts["BLOCK_K"] = PACKED_K  # the packed kernel in the first packed move's steps
            run = f"if use_taps:\n    {taps_run}\nelse:  # the packed (channel, th, tw) K\n    {launch(packed)}"
        if one:
            return f'''_, th, _, _, eh = kc_phase_taps(0, sh, ph, dh, KH)  # tap step and input shift: the same for all
_, tw, _, _, ew = kc_phase_taps(0, sw, pw, dw, KW)
M0 = N * triton.cdiv(OH, sh) * triton.cdiv(OW, sw)  # phase (0, 0)'s outputs: every phase's rows on its grid
grid = (triton.cdiv(M0, {bm}) * triton.cdiv(COPG, bn) * sh * sw, groups)  # the phase fastest on axis 0
{run}''', (FIRST_TAP, *kernels)
        return f'''for rh in range(min(sh, OH)):  # one launch per output phase (rh, rw)
    fh, th, nh, bh, eh = kc_phase_taps(rh, sh, ph, dh, KH)
    for rw in range(min(sw, OW)):
        fw, tw, nw, bw, ew = kc_phase_taps(rw, sw, pw, dw, KW)
        OHR, OWR = (OH - rh + sh - 1) // sh, (OW - rw + sw - 1) // sw
        M, K = N * OHR * OWR, CPG * nh * nw  # K == 0: no tap reaches this phase, bias only
        grid = (triton.cdiv(M, {bm}) * triton.cdiv(COPG, bn), groups)
{indent(run, 8)}''', kernels

    # the taps K loop where a group's in-channels fill chunks; fewer: the packed K
    choose = "" if p.k_order != "taps" else f'''use_taps = CPG >= {TAPS_MIN_CHUNKS * bk}  # else the packed K
if use_taps:  # w as (CO, KH, KW, CPG): each tap's channel chunk contiguous
    w = w.reshape(groups, CPG, COPG, KH, KW).permute(0, 2, 3, 4, 1).contiguous()
'''
    if p.short_one_launch:  # one launch where the phases' GEMMs are short beside their stores, else a launch each
        (one, one_blocks), (each, each_blocks) = phases(True), phases(False)
        launch_lines = f'''{choose}# every phase in one launch where the phases' GEMMs are short beside their stores
if CPG * kc_mean_taps(sh, ph, dh, KH) * kc_mean_taps(sw, pw, dw, KW) <= {SHORT_PHASES} * bn:
{indent(one, 4)}
else:
{indent(each, 4)}'''
        blocks = (inspect.getsource(kc_phase_taps), inspect.getsource(kc_mean_taps), *one_blocks,
                  *(b for b in each_blocks if b not in one_blocks))
    else:
        lines, kernel_blocks = phases(p.one_launch)
        launch_lines = choose + lines
        blocks = (inspect.getsource(kc_phase_taps), *kernel_blocks)
    if p.as_conv:  # (a taps move's packed GEMM in the first packed move's steps)
        route_consts = {**consts, "BLOCK_K": PACKED_K} if p.k_order == "taps" else consts
        launch_lines, route = conv_route(op, names, launch_lines, route_consts, options,
                                         bk if p.k_order == "taps" else 0, p.compiled_sizes)
        blocks += route
    one_d = op.kind == "conv_transpose1d"  # a one-row 2-D one: x (N, C, 1, L), w (C_in, C_out/groups, 1, K)
    one_row = ("\nx = x.reshape(x.shape[0], x.shape[1], 1, x.shape[2])  # (N, C, L) as one-row images"
               "\nw = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])") if one_d else ""
    bias = attr(d["bias"]) if d.get("bias") else "None"
    body = f'''
w, bias = {attr(d["weight"])}, {bias}
unbatched = x.dim() == {3 - one_d}
if unbatched:
    x = x.reshape(1, *x.shape){one_row}
N, C, H, W = x.shape
CI, COPG, KH, KW = w.shape
{_hyper(op)}
OH = (H - 1) * sh - 2 * ph + dh * (KH - 1) + oph + 1
OW = (W - 1) * sw - 2 * pw + dw * (KW - 1) + opw + 1
CO, CPG = COPG * groups, C // groups
y = torch.empty((N, CO, max(OH, 0), max(OW, 0)), dtype=x.dtype, device=x.device)
{_operand_lines(op)}if y.numel() > 0:
    w = w.contiguous()
    bn = min({bn}, max(16, triton.next_power_of_2(COPG)))
    prec = "{p.precision}" if x.dtype == torch.float32 else "ieee"  # fp16/bf16 take the tensor cores as they are
{indent(launch_lines.strip(chr(10)), 4)}
{"y = y.reshape(y.shape[0], y.shape[1], y.shape[3])" + chr(10) if one_d else ""}return y.reshape(y.shape[1:]) if unbatched else y'''
    return Rendered((*blocks, operands.HELPER) if operands.count(op) else blocks, body)
