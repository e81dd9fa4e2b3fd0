"""The conv3d family's kernels (an implicit GEMM over output voxels, the epilogue applied before its one store: the
pointwise steps, their parameter operands read at the output's coordinates, families/conv/operands.py; a K loop over
packed (channel, kd, kh, kw) indices, over the taps and channel chunks, or over packed indices as per-row and per-K
offsets, the rest shared) and the forward that launches one (implicit_gemm.py explains the taps and offsets loops'
layout choices)."""

from __future__ import annotations

import inspect
import textwrap
from string import Template

from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.families.conv.implicit_gemm import (SIZE_HELPERS, TILE, hyper_lines,
                                                                     OFFSETS_TABLE_BLOCK, offsets_loop,
                                                                     offsets_table, taps_loop)
from kernelcraft.propose.builtin.families.conv import direct, operands, shifted
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.paths import attr
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.steps import epilogue_lines

NDIM = 5  # the kernel's output dims, (n, co, od, oh, ow): an epilogue operand's strides
# a padded conv's in-channels per group from which an offsets move runs the taps loop in chunks of this many
# instead: padded, the offsets loop needs bounds masks and the taps loop was faster; unpadded (no masks) it was
# slower (evidence.py). 3 in-channels stay offsets
TAPS_FIRST = 32
# the implicit-GEMM kernels' sizes, strides, padding and dilation (run-time parameters, or constexprs under a move's
# compiled_sizes) and the forward's names for them
SIZES = ("M", "C", "D", "H", "W", "CO", "OD", "OH", "OW", "K", "CPG", "COPG", "SD", "SH", "SW", "PD", "PH", "PW", "DD",
         "DH", "DW")
SIZE_ARGS = ("M", "C", "D", "H", "W", "CO", "OD", "OH", "OW", "K", "CPG", "COPG", "sd", "sh", "sw", "pd", "ph", "pw",
             "dd", "dh", "dw")

# The 3-D implicit GEMM: the tile prologue, a K loop ($kloop: _PACKED_K, _TAPS_K or _OFFSETS_K, the rest shared),
# bias, steps.
_CONV3D = Template('''
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
$kloop
x = acc
if HAS_BIAS:
    x += tl.load(b_ptr + co, mask=nmask, other=0.0).to(tl.float32)[None, :]
$epilogue
# stored as the dot leaves the tile, [BLOCK_M, BLOCK_N]. Transposed first (so that a warp would write consecutive
# voxels of one out-channel), the layout change through shared memory made every move 1.4-3.4x slower on an H100 on
# level1/54 and 59 (3 in-channels, a K loop of a few steps) and the first move 1.17-1.24x slower on level 2's Conv3d
# chains; of 50 strict moves timed there only the second (at 3 in-channels: the packed loop, 32-wide K steps) was
# faster transposed, by 1.1-1.16x (benchmarks/results/moves-conv3d-store-h100-2026-11-26.json)
out = (n.to(tl.int64) * CO * OD * OH * OW + vox)[:, None] + (co.to(tl.int64) * OD * OH * OW)[None, :]
tl.store(y_ptr + out, x.to(y_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])
''')

# K = (channel, kd, kh, kw) packed: each step decodes its K indices and gathers a 2-D patch; w is (CO, K).
_PACKED_K = '''for k0 in range(0, K, BLOCK_K):
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
    acc = tl.dot(a, b, acc, input_precision=PREC)'''

# K = taps (kd, kh, kw) x the group's in-channels in BLOCK_K chunks (implicit_gemm.taps_loop; no unrolling of up to
# 125 taps); w is (CO, KD, KH, KW, CPG), permuted by the forward.
_TAPS_K = taps_loop("KD * KH * KW", (("id_", "id0 + tap // (KH * KW) * DD", "D"),
                                     ("ih", "ih0 + tap // KW % KH * DH", "H"), ("iw", "iw0 + tap % KW * DW", "W")),
                    "cin.to(tl.int64) * D * H * W", "(id_ * H + ih) * W + iw")

# K = (channel, kd, kh, kw) packed as in _PACKED_K, each element's input offset the sum of its row's window origin
# and its K index's offset, read from a table decoded once per call (implicit_gemm.offsets_loop, offsets_table);
# bounds masks only where BOUNDS (the conv pads); w is (CO, K).
_AXES = (("td", "id0", "KD", "DD", "D"), ("th", "ih0", "KH", "DH", "H"), ("tw", "iw0", "KW", "DW", "W"))
_OFFSETS_K = offsets_loop(_AXES)


def render(op: Op, p, names: Names) -> Rendered:
    """conv3d on tiles `p` (the family's Conv3dTiles)."""
    d = op.detail
    bm, bn, bk, group = int(p.BLOCK_M), int(p.BLOCK_N), int(p.BLOCK_K), int(p.GROUP_M)

    compiled = bool(p.compiled_sizes)  # the sizes constexprs: a build per input shape

    def kernel(name, kloop, table=False):  # the kernels take the same parameters (the taps one a permuted w), the
        return TritonKernel(               # offsets one its table and BOUNDS too
            names(name),
            ("x_ptr", "w_ptr", "b_ptr", "y_ptr", *("tab_ptr",) * table, *operands.params(op, NDIM),
             *(() if compiled else SIZES)),
            ("KD", "KH", "KW", "HAS_BIAS", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "PREC", *("BOUNDS",) * table,
             *operands.flags(op), *(SIZES if compiled else ())),
            _CONV3D.substitute(tile=TILE, kloop=kloop,
                               epilogue="\n".join(epilogue_lines(d.get("steps") or [], _load))),
            Scalars.of(op))  # the numbers the steps read from the module: the kernel's first parameters

    # bounds: the offsets kernel's BOUNDS (Python source), which takes its table too; block_k: the K step's width
    def launch(k, bounds=None, block_k=bk):
        extra = {} if bounds is None else {"BOUNDS": bounds}
        sizes = dict(zip(SIZES, SIZE_ARGS))
        return k.launch(
            "grid", ["x", "w", "x if bias is None else bias", "y", *("tab",) * len(extra), *operands.args(op, NDIM),
                     *([] if compiled else SIZE_ARGS)],
            {"KD": "KD", "KH": "KH", "KW": "KW", "HAS_BIAS": "bias is not None", "BLOCK_M": "bm", "BLOCK_N": "bn",
             "BLOCK_K": block_k, "GROUP_M": group, "PREC": "prec", **extra, **operands.flag_consts(op),
             **(sizes if compiled else {})},
            num_warps=int(p.num_warps), num_stages=int(p.num_stages))

    packed = kernel("kc_conv3d_kernel", _PACKED_K)
    kernels = (packed,)
    run = launch(packed)

    # the taps loop in `chunk`-wide channel chunks where a group has `chunk` in-channels or more (and `where`
    # holds), else the lines `other`
    def taps_branch(chunk: int, other: str, where: str = "") -> str:
        return (f"if CPG >= {chunk}{where}:  # taps K loop over w as (CO, KD, KH, KW, CPG): each tap's channel chunk "
                f"contiguous\n        w = w.permute(0, 2, 3, 4, 1).contiguous()\n"
                f"        {launch(taps, block_k=chunk)}\n    else:\n        {other}")

    taps = kernel("kc_conv3d_taps_kernel", _TAPS_K)
    order = "offsets" if p.k_order == "shifted" else p.k_order  # where the shifted rows don't apply: offsets
    if order == "taps":  # the taps K loop where a group's in-channels fill a chunk; fewer: the packed K
        kernels += (taps,)
        run = taps_branch(bk, run)
    elif order == "offsets":  # the offsets K loop where its int32 per-K offsets fit; else the packed K
        offsets = kernel("kc_conv3d_offsets_kernel", _OFFSETS_K, table=True)
        params, consts, body = offsets_table(_AXES)
        table = TritonKernel(names("kc_conv3d_offsets_table"), params, consts, body,
                             comment="the offsets K loop's table: each K index's input offset and tap offsets")
        kernels += (table, offsets)
        fill = table.launch(f"(triton.cdiv(K, {OFFSETS_TABLE_BLOCK}),)", ["tab", "K", "D", "H", "W", "dd", "dh", "dw"],
                            {"KD": "KD", "KH": "KH", "KW": "KW", "BLOCK": OFFSETS_TABLE_BLOCK})
        run = (f"if CPG * D * H * W < 2**31:  # a K index's offset in a group's input fits int32\n"
               f"        tab = torch.empty(({1 + len(_AXES)}, K), dtype=torch.int32, device=x.device)\n"
               f"        {fill}\n"
               f"        {launch(offsets, '(pd > 0 or ph > 0 or pw > 0)')}  # unpadded: no bounds masks\n"
               f"    else:\n        {run}")
        # a padded conv whose groups have TAPS_FIRST in-channels or more: the taps loop instead (OFFSETS_IDEA)
        kernels += (taps,)
        run = taps_branch(TAPS_FIRST, indent(run, 4).lstrip(), " and (pd > 0 or ph > 0 or pw > 0)")
    if p.k_order == "shifted":  # the shifted-rows GEMM where it applies, the direct kernel where it does
        epilogue = "\n".join(epilogue_lines(d.get("steps") or [], _load))
        rows = shifted.kernel("dhw", names, operands.params(op, NDIM), operands.flags(op), epilogue, Scalars.of(op),
                              compiled=compiled)
        split = shifted.split_kernel("dhw", names)
        lines = shifted.lines("dhw", rows, split, operands.args(op, NDIM), operands.flag_consts(op))
        # the direct kernel for few in-channels, where the epilogue is one it applies (conv/direct.py)
        near = direct.kernel("dhw", names, epilogue, Scalars.of(op), direct.TILES_3D) if direct.fits(op) else None
        # `run` continues at the body's indentation (4): from column 0 under the first move's else
        run = indent(direct.first_move("dhw", lines, near, direct.TILES_3D, textwrap.dedent("    " + run)), 4).lstrip()
        kernels = (*shifted.BLOCKS, split, rows, *((near,) if near is not None else ()), *kernels)
    bias = attr(d["bias"]) if d.get("bias") else "None"
    voxels = (f"bm = {2 * bm} if bn == {bn // 2} else {bm}  # a half-wide channel tile: twice the voxels, the same area"
              if p.wide_m else f"bm = {bm}")
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
{_operand_lines(op)}if y.numel() > 0:
    w = w.contiguous()
    M, K, COPG = N * OD * OH * OW, CPG * KD * KH * KW, CO // groups
    bn = min({bn}, max(16, triton.next_power_of_2(COPG)))
    {voxels}
    prec = "{p.precision}" if x.dtype == torch.float32 else "ieee"  # fp16/bf16 take the tensor cores as they are
    grid = (triton.cdiv(M, bm) * triton.cdiv(COPG, bn), groups)
    {run}
return y.reshape(y.shape[1:]) if unbatched else y'''
    helpers = [inspect.getsource(f) for f in SIZE_HELPERS] + ([operands.HELPER] if operands.count(op) else [])
    return Rendered((*helpers, *kernels), body)


def _load(k: int) -> str:
    """Epilogue operand k at the tile's outputs: rows (n, od, oh, ow) x out-channels co."""
    return operands.tile_load(k, ("od", "oh", "ow"))


def _operand_lines(op: Op) -> str:
    """The forward's lines binding each epilogue operand and its strides over the kernel's (n, co, od, oh, ow)."""
    return operands.lines(op, "([] if unbatched else [N]) + [CO, OD, OH, OW]",
                          "([] if unbatched else [0]) + [1, 2, 3, 4]", NDIM)
