"""The shifted-rows GEMM, shared by the convolution families (conv2d/1d, conv3d, and the transposed convs that equal
a stride-1 conv): the kernels for 2 or 3 spatial axes, generated from the axes, and the forward lines that launch
them where they apply.

At stride 1 with one group, x copied once into a zero-padded channels-last buffer X (rows: the padded input's
positions (n, [d,] h, w) in order; columns: C channels, rounded up to CP, a multiple of 4 so a row is 16-byte
aligned) makes the input a tap adds to the output at padded position m row m + shift(tap) of X, shift(tap) =
sum over the axes of tap_a * dilation_a * (the padded sizes of the axes after a). So a tile of BLOCK_M consecutive
positions reads, for each tap and channel chunk, one BLOCK_M x BLOCK_K box of X at a constant shift, which TMA loads
as it lies (rows past the end and columns past C zero-filled); the weight, copied likewise to (CO, taps, CP) rows,
gives the matching box. No gather, no index math per element. x and the weight are split into TF32 parts on the way
(hi = x rounded by the GEMM family's kc_tf32_round, lo = the remainder rounded, 0 where x is infinite or NaN), and
each step takes three TF32 products, hi*hi into acc and lo*hi + hi*lo into `small`, a non-finite `small` dropped
(an infinite hi times a lo is no remainder). Rows whose position lies in the padding are computed and never stored.

The weight is read through a (CO, taps, C) descriptor, so a box past a tap's channels is zero-filled, not the next
tap's. With few in-channels (PACK_C) K packs the taps of one axis with the channels: X viewed as overlapping rows
(M, taps, C), one 3-D box a step. `kernel(compiled=True)` makes the sizes constexprs (one build per input shape).

Strides (the conv and conv3d families; `fold`): a stride-s axis is folded into the channels on the copy (space to
depth). X's row (n, .., Y, X) holds, as channel (c, dy, dx), x[n, c, Y*sh + dy - ph, X*sw + dx - pw], and the weight
takes the same copy unpadded, tap (ky, kx) channel (c, dy, dx) being w[co, c, ky*sh + dy, kx*sw + dx] (0 past the
kernel): the conv is then a stride-1 conv of ceil(k / s) taps an axis over C * sh * sw channels, which the same GEMM
runs. It applies at dilation 1 where the folded kernel (ceil(k / s) * s an axis) holds at most FOLD_WASTE times the
taps (an 11 x 11 kernel at stride 4: 12 x 12, 1.19; ResNet's 7 x 7 at stride 2: 1.31; a 3 x 3 at stride 2, 1.78,
and a 1 x 1 at stride 2, 4, keep the packed GEMM), and where it leaves more than one tap (kc_conv_fold).
"""

from __future__ import annotations

import inspect

from kernelcraft.propose.builtin.families.conv.implicit_gemm import TILE
from kernelcraft.propose.builtin.families.gemm.kernels import TF32_ROUND
from kernelcraft.propose.builtin.families.gemm.tma import TMA_DESC, TMA_OK
from kernelcraft.propose.builtin.family import Names, TritonKernel
from kernelcraft.propose.builtin.scalars import Scalars

# BLOCK_M, BLOCK_N, warps, stages by the group's out-channels and the in-channels, from a probe: 64 out-channels wide
# on 4 warps for 64 or fewer, else 128 on 8; K steps (bk_s in the forward) of 16 channels for 16 or fewer, else 32.
# The forward narrows the channel tile to the out-channels rounded up to a power of two (16 at least), so a narrow
# conv's tile does not idle (a half-idle tile lost to the packed GEMM). What both were measured on: evidence.py
TILES = "(128, 64, 4, 4) if COPG <= 64 else (128, 128, 8, 3 if CF > 16 else 4)"
# Few in-channels (PACK_C or fewer) leave most of a 16-wide K step empty: there K packs the last axis of more than one
# tap with the channels, (taps, C) one box of X viewed as overlapping rows (row m's taps `step` rows apart), where
# that box (taps and channels rounded up to powers of two) is at most PACK_K wide
PACK_C, PACK_K = 8, 64
# Strided convs fold (space to depth) where the folded kernel holds at most this many times the kernel's taps
FOLD_WASTE = 1.5
# Over three axes with few in-channels the packed K (and K = channels, worse) lost to the conv3d family's offsets loop
# on every KernelBench conv it met (evidence.py). So 3-D convs of PACK_C or fewer in-channels keep their gathers: the
# shifted rows over three axes take more than PACK_C (`applies`)


def _axes(axes: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """Per axis ("dhw" or "hw"): its padded size, kernel size, dilation and output size names in the kernels."""
    up = axes.upper()
    return [f"{a}P" for a in up], [f"K{a}" for a in up], [f"D{a}" for a in up], [f"O{a}" for a in up]


def _product(names: list[str]) -> str:
    return " * ".join(names) if names else "1"


def _coords(axes: str, padded: list[str], var: str, prefix: str) -> list[str]:
    """Lines decoding flat padded positions `var` into the image `n` and a coordinate per axis, `prefix` + axis."""
    lines = [f"n = {var} // ({_product(padded)})"]
    for i, a in enumerate(axes):
        inner = padded[i + 1:]
        lines.append(f"{prefix}{a} = ({var} // ({_product(inner)})) % {padded[i]}" if inner
                     else f"{prefix}{a} = {var} % {padded[i]}")
    return lines


def _linear(terms: list[str], sizes: list[str]) -> str:
    """(t0 * S1 + t1) * S2 + t2 ...: coordinates `terms` linearized over `sizes` (the first size unused)."""
    out = terms[0]
    for t, s in zip(terms[1:], sizes[1:]):
        out = f"({out}) * {s} + {t}"
    return out


def sizes(axes: str) -> tuple[str, ...]:
    """The shifted-rows GEMM's size parameters: run-time ones, or (compiled) constexprs."""
    padded, _, _, out = _axes(axes)
    return ("M", "C", "CP", "CO", "COPG", *padded, *out)


def kernel(axes: str, names: Names, extra: tuple[str, ...], flags: tuple[str, ...], epilogue: str,
           scalars: Scalars, compiled: bool = False) -> TritonKernel:
    """The shifted-rows GEMM over `axes` with `epilogue` (lines on the fp32 tile x, the output coordinates o<axis>,
    out-channels co and nmask defined) and the run-time parameters `extra` after its pointers, constexprs `flags`
    after its own. `compiled`: its sizes (`sizes`) are constexprs, one build per input shape, so the output rows'
    decoding divides by constants (multiplies and shifts): the K loop stays the same, the epilogue's index work goes
    (fewer instructions and registers, and faster where the conv families' first moves were timed with it:
    evidence.py). The conv and conv3d first moves set it; the transposed convs' moves do not."""
    padded, ksize, dil, out = _axes(axes)
    taps = []
    for i in range(len(axes)):
        inner = ksize[i + 1:]
        tap = f"tap // ({_product(inner)})" if inner else "tap"
        tap = f"({tap}) % {ksize[i]}" if i else tap
        taps.append(f"({tap}) * {dil[i]} * {_product(padded[i + 1:])}")
    lines = _coords(axes, padded, "rm", "o")
    valid = " & ".join(f"(o{a} < {o})" for a, o in zip(axes, out))
    body = "\n".join([
        "# program (tile, group 0): padded input positions rm x out-channels co",
        TILE,
        *lines,
        f"pix = {_linear([f'o{a}' for a in axes], out)}",
        f"mmask = (rm < M) & {valid}",
        "nmask = rn < COPG",
        "acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)",
        "small = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)",
        "if PACK > 1:  # K = (the packed axis' taps, channels): one 3-D box of the overlapping-rows view a step",
        f"    for g in range(0, {_product(ksize)} // PACK):",
        "        tap = g * PACK  # the group's first tap: the packed axis' tap 0 (the axes after it have one tap)",
        f"        row = pid_m * BLOCK_M + {' + '.join(taps)}",
        "        a_hi = xh_desc.load([row, 0, 0]).reshape([BLOCK_M, BLOCK_K])",
        "        a_lo = xl_desc.load([row, 0, 0]).reshape([BLOCK_M, BLOCK_K])",
        "        b_hi = wh_desc.load([pid_n * BLOCK_N, g, 0, 0]).reshape([BLOCK_N, BLOCK_K]).T",
        "        b_lo = wl_desc.load([pid_n * BLOCK_N, g, 0, 0]).reshape([BLOCK_N, BLOCK_K]).T",
        '        acc = tl.dot(a_hi, b_hi, acc, input_precision="tf32")',
        '        small = tl.dot(a_lo, b_hi, small, input_precision="tf32")',
        '        small = tl.dot(a_hi, b_lo, small, input_precision="tf32")',
        "else:  # K = channels, a tap at a time in BLOCK_K chunks",
        "    chunks = tl.cdiv(C, BLOCK_K)",
        f"    for step in range(0, {_product(ksize)} * chunks):",
        "        tap = step // chunks",
        "        c0 = (step % chunks) * BLOCK_K",
        f"        row = pid_m * BLOCK_M + {' + '.join(taps)}  # the tap's rows of X: a constant shift",
        "        a_hi = xh_desc.load([row, c0])",
        "        a_lo = xl_desc.load([row, c0])",
        "        b_hi = wh_desc.load([pid_n * BLOCK_N, tap, c0]).reshape([BLOCK_N, BLOCK_K]).T",
        "        b_lo = wl_desc.load([pid_n * BLOCK_N, tap, c0]).reshape([BLOCK_N, BLOCK_K]).T",
        '        acc = tl.dot(a_hi, b_hi, acc, input_precision="tf32")',
        '        small = tl.dot(a_lo, b_hi, small, input_precision="tf32")',
        '        small = tl.dot(a_hi, b_lo, small, input_precision="tf32")',
        'x = acc + tl.where(tl.abs(small) < float("inf"), small, 0.0)  # an infinite hi times a lo: no remainder',
        "if HAS_BIAS:",
        "    x += tl.load(b_ptr + co, mask=nmask, other=0.0).to(tl.float32)[None, :]",
        epilogue,
        f"out = (n.to(tl.int64) * CO * {_product(out)} + pix)[:, None] + (co.to(tl.int64) * {_product(out)})[None, :]",
        "tl.store(y_ptr + out, x.to(y_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])"])
    name = "kc_conv2d_shifted_kernel" if len(axes) == 2 else "kc_conv3d_shifted_kernel"
    run_time = () if compiled else sizes(axes)
    return TritonKernel(names(name), ("xh_desc", "xl_desc", "wh_desc", "wl_desc", "b_ptr", "y_ptr", *extra,
                                      *run_time),
                        (*ksize, *dil, "PACK", "HAS_BIAS", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", *flags,
                         *(sizes(axes) if compiled else ())), body, scalars)


def split_kernel(axes: str, names: Names) -> TritonKernel:
    """x (N, C, *sizes) -> hi, lo (R rows of CP, the first P = N * prod(padded sizes) x's positions, zeros after):
    zero-padded, channels last, split into TF32 parts in one pass (loaded along a channel's positions, stored along a
    position's channels). Each axis folds F<axis> phases into the channels (space to depth, module docstring; 1: no
    fold): row (n, q..) channel (c, phase..) holds x[n, c, q * F - pad + phase ..], 0 outside x. The weight (CO, C,
    *kernel) takes it too, as CO images of the kernel's size, unpadded."""
    up = axes.upper()
    padded = [f"{a}P" for a in up]
    sizes = list(up)
    pads = [f"P{a}" for a in up]
    folds = [f"F{a}" for a in up]
    lines = _coords(axes, padded, "p", "q")
    src = []  # per axis, the source coordinate of each (row, channel): the row's origin plus the channel's phase
    for i, a in enumerate(axes):
        inner = _product(folds[i + 1:])
        phase = f"(c // ({inner})) % {folds[i]}" if folds[i + 1:] else f"c % {folds[i]}"
        src.append(f"i{a} = (q{a} * {folds[i]} - {pads[i]})[:, None] + ({phase})[None, :]")
    inside = " & ".join(f"(i{a} >= 0) & (i{a} < {s})" for a, s in zip(axes, sizes))
    at = _linear([f"i{a}" for a in axes], sizes)
    body = "\n".join([
        "p = tl.program_id(0).to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)",
        "c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)",
        *lines,
        f"cs = c // ({_product(folds)})  # x's channel",
        *src,
        f"inside = ((p < P)[:, None] & (cs < C)[None, :]) & {inside}",
        f"v = tl.load(x_ptr + (n * C)[:, None] * ({_product(sizes)}) + (cs.to(tl.int64) * ({_product(sizes)}))[None, :]"
        f" + {at}, mask=inside, other=0.0)",
        "hi = kc_tf32_round(v)",
        'lo = kc_tf32_round(tl.where((hi == v) | (tl.abs(hi) == float("inf")) | (hi != hi), 0.0, v - hi))',
        "out = p[:, None] * CP + c[None, :]",
        "keep = (p < R)[:, None] & (c < CP)[None, :]  # rows past P (the packed view's overrun): zeros",
        "tl.store(hi_ptr + out, hi, mask=keep)",
        "tl.store(lo_ptr + out, lo, mask=keep)"])
    name = "kc_conv_split_rows_kernel" if len(axes) == 2 else "kc_conv3d_split_rows_kernel"
    return TritonKernel(names(name), ("x_ptr", "hi_ptr", "lo_ptr", "P", "R", "C", "CP", *sizes, *padded, *pads,
                                      *folds), ("BLOCK_P", "BLOCK_C"), body)


def kc_conv_fold(strides, dilations, ksize, channels, min_channels, waste):
    """The fold a shifted-rows GEMM takes for a conv (its strides, dilations, kernel sizes, in-channels), one factor
    an axis, or None where it takes none: stride 1, more than one tap and more than min_channels in-channels, no
    fold; a stride past 1 folds (space to depth) at dilation 1 where the folded kernel keeps more than one tap and
    holds at most `waste` times the kernel's taps (0: strides do not fold), over more than min_channels channels."""
    taps = folded = reach = 1
    for k in ksize:
        taps = taps * k
    if all(s == 1 for s in strides):
        return tuple(strides) if taps > 1 and channels > min_channels else None
    if not waste or any(d != 1 for d in dilations):
        return None
    for k, s in zip(ksize, strides):
        folded = folded * -(-k // s)
        reach = reach * -(-k // s) * s
        channels = channels * s
    return tuple(strides) if folded > 1 and reach <= waste * taps and channels > min_channels else None


def applies(axes: str, pad: str = "p", fold: bool = False) -> str:
    """The forward's condition (Python source) for the shifted GEMM, binding `folds` (kc_conv_fold): fp32 at 3xTF32
    on a Hopper GPU, one group, a padded input of fewer than 2**31 rows (TMA's coordinates are 32-bit), stride 1 and
    more than one tap, or (`fold`: the conv and conv3d families) strides that fold; over three axes, more than PACK_C
    in-channels (folded). `pad` names the forward's padding variables (pad + axis)."""
    up = axes.upper()
    padded = " * ".join(f"({s} + 2 * {pad}{a})" for a, s in zip(axes, up))
    args = ", ".join([f"({', '.join(f's{a}' for a in axes)},)", f"({', '.join(f'd{a}' for a in axes)},)",
                      f"({', '.join(f'K{a}' for a in up)},)", "C", str(PACK_C if len(axes) == 3 else 0),
                      str(FOLD_WASTE if fold else 0)])
    return (f'prec == "tf32x3" and groups == 1 and kc_tma_gpu(x) and N * {padded} < 2 ** 31 and '
            f'(folds := kc_conv_fold({args})) is not None')


def lines(axes: str, gemm: TritonKernel, split: TritonKernel, extra: list[str], flag_consts: dict,
          pad: str = "p") -> str:
    """The forward's lines running the shifted GEMM once `applies` holds (and bound `folds`): the copies of x (N, C,
    *sizes) and the weight w (CO, C, *kernel), folded (module docstring) into CF channels and K<axis>F taps an axis,
    their descriptors, the tiles (TILES), the launch. `extra` are the GEMM's arguments after y, `pad` names the
    padding variables (pad + axis: the conv's padding, which the copy applies)."""
    up = axes.upper()
    padded = [f"{a}P" for a in up]
    ksize = [f"K{a}" for a in up]
    folded = [f"K{a}F" for a in up]
    fold = [f"folds[{i}]" for i in range(len(axes))]

    def copy(src: str, dst: str, rows: str, written: str, sizes: list[str], pads: list[str], padded_: list[str]
             ) -> str:
        return split.launch("(triton.cdiv(" + written + ", 64), triton.cdiv(CP, bc))",
                            [src, f"{dst}[0]", f"{dst}[1]", rows, written, "C", "CP", *sizes, *padded_, *pads,
                             *fold], {"BLOCK_P": 64, "BLOCK_C": "bc"}, num_warps=4)
    compiled = sizes(axes)[0] in gemm.constexprs  # the kernel's sizes are constexprs: passed as such
    size_args = {k: "CF" if k == "C" else k for k in sizes(axes)}
    run = gemm.launch("grid", ["xh", "xl", "wh", "wl", "x if bias is None else bias", "y", *extra,
                               *([] if compiled else size_args.values())],
                      {**dict(zip(ksize, folded)), **{f"D{a.upper()}": f"d{a}" for a in axes}, "PACK": "pack",
                       "HAS_BIAS": "bias is not None", "BLOCK_M": "bm_s", "BLOCK_N": "bn_s", "BLOCK_K": "bk_s",
                       "GROUP_M": 8, **flag_consts, **(size_args if compiled else {})},
                      num_warps="warps_s", num_stages="stages_s")
    taps = " * ".join(folded)
    # a step of the packed axis' taps in rows of X: its dilation times the padded sizes after it
    steps = ", ".join(f"d{a} * {_product(padded[i + 1:])}" if i + 1 < len(axes) else f"d{a}"
                      for i, a in enumerate(axes))
    return f'''# shifted rows: x and w copied once into padded channels-last TF32 parts (each stride folded into the
# channels), each step's boxes loaded by TMA
CF = C * {" * ".join(fold)}
{", ".join(folded)} = {", ".join(f"triton.cdiv({k}, {f})" for k, f in zip(ksize, fold))}
CP = triton.cdiv(CF, 4) * 4
{", ".join(padded)} = {", ".join(f"triton.cdiv({s} + 2 * {pad}{a}, {f})" for a, s, f in zip(axes, up, fold))}
M = N * {" * ".join(padded)}
ks = ({", ".join(folded)})
pa = {_last_axis(folded)}  # the last axis of more than one tap
bcp, pk = max(4, triton.next_power_of_2(CF)), triton.next_power_of_2(ks[pa])  # a packed box's channels and taps
pk = max(pk, 16 // bcp)  # a dot's K is 16 or more
pack = ks[pa] if CF <= {PACK_C} and pk * bcp <= {PACK_K} else 1  # few channels: K = (that axis' taps, channels)
step = ({steps})[pa]
R = M + (pack - 1) * step  # the rows the packed view reads past the last position
bc = min(64, triton.next_power_of_2(CP))
xs = torch.empty((2, R, CP), dtype=torch.float32, device=x.device)
{copy("x.contiguous()", "xs", "M", "R", list(up), [f"{pad}{a}" for a in axes], padded)}
ws = torch.empty((2, CO * {taps}, CP), dtype=torch.float32, device=x.device)
{copy("w", "ws", f"CO * {taps}", f"CO * {taps}", ksize, ["0"] * len(axes), folded)}
bm_s, bn_s, warps_s, stages_s = {TILES}
bn_s = min(bn_s, max(16, triton.next_power_of_2(COPG)))  # 32 or fewer out-channels: a narrower tile, none idle
if pack > 1:  # X as overlapping rows (M, pack, CF): row m's taps along the packed axis, `step` rows apart
    bk_s = pk * bcp
    xh, _ = kc_tma_desc(xs[0].as_strided((M, pack, CF), (CP, step * CP, 1)), [bm_s, pk, bcp], False)
    xl, _ = kc_tma_desc(xs[1].as_strided((M, pack, CF), (CP, step * CP, 1)), [bm_s, pk, bcp], False)
    wh, _ = kc_tma_desc(ws[0].reshape(CO, {taps} // pack, pack, CP)[..., :CF], [bn_s, 1, pk, bcp], False)
    wl, _ = kc_tma_desc(ws[1].reshape(CO, {taps} // pack, pack, CP)[..., :CF], [bn_s, 1, pk, bcp], False)
else:
    bk_s = 16 if CF <= 16 else 32
    xh, _ = kc_tma_desc(xs[0][:M, :CF], [bm_s, bk_s], False)
    xl, _ = kc_tma_desc(xs[1][:M, :CF], [bm_s, bk_s], False)
    wh, _ = kc_tma_desc(ws[0].reshape(CO, {taps}, CP)[..., :CF], [bn_s, 1, bk_s], False)
    wl, _ = kc_tma_desc(ws[1].reshape(CO, {taps}, CP)[..., :CF], [bn_s, 1, bk_s], False)
grid = (triton.cdiv(M, bm_s) * triton.cdiv(COPG, bn_s), 1)
{run}'''


def _last_axis(ksize: list[str]) -> str:
    """Python source: the index of the last of the kernel sizes `ksize` above 1 (0 where none is)."""
    out = "0"
    for i, k in enumerate(ksize[1:], 1):
        out = f"{i} if {k} > 1 else ({out})" if i > 1 else f"{i} if {k} > 1 else 0"
    return out


# the module-level helpers the kernels and lines use, before the kernels
BLOCKS = (TMA_OK, TMA_DESC, TF32_ROUND, inspect.getsource(kc_conv_fold))
