"""What the implicit-GEMM convolution families share (conv, conv3d, conv_transpose): their tile parameters and
moves, the swizzled tile prologue of their kernels, the lines binding a conv's hyper-parameters in the forward, and
the output-size helpers the forward calls.

Precision: "ieee" is exact fp32 on the FMA units; "tf32x3" splits each fp32 operand into a TF32 part and a TF32
remainder and sums three tensor-core products, which keeps fp32-grade accuracy (about 1e-6 relative); "tf32"
rounds inputs to TF32 (10-bit mantissa) and is offered only under a policy that admits TF32.

K order (conv, conv3d and conv_transpose, whose tiles set TAPS): "packed" walks K = (channel, kd, kh, kw) flat,
decoding every K index with div/mod and gathering a BLOCK_M x BLOCK_K patch with 2-D coordinates and bounds; "taps"
walks the kernel's taps (a transposed conv's phase: only the taps that reach it), each tap's in-channels in BLOCK_K
chunks: the input coordinates and bounds of a tap are BLOCK_M vectors, the channel chunk a BLOCK_K vector, the tile
their broadcast sum (no div/mod per element), and the weight, permuted once per call to (CO, KD, KH, KW, CPG), gives
each chunk contiguously. `taps_loop` writes that loop for every family. The forward takes the taps kernel only where
a group has at least BLOCK_K in-channels (fewer: the packed K wastes less of each step). "offsets" (families whose
tiles set OFFSETS) walks K packed as "packed" does, but splits a patch element's input offset into a per-row part
(the row's window origin, once per tile) and a per-K part (the K index's channel and tap as one offset, decoded once
per call into a table by a small kernel), so an element's address is one add; its bounds masks are compiled in only
where the conv pads (without padding every tap of an output lies in the input), and the patch is loaded rows
fastest (a warp reads consecutive outputs' inputs, as the taps loop does). `offsets_loop` writes that loop,
`offsets_table` the table's kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from kernelcraft.propose.builtin.family import Params
from kernelcraft.propose.builtin.paths import attr

GATHER = "gather input patches straight from x (padding as a mask, no im2col buffer)"
PRECISIONS = ("ieee", "tf32x3", "tf32")
K_ORDERS = ("packed", "taps", "offsets", "shifted")
TAPS_IDEA = ("K loop over the kernel taps, each tap's in-channels in BLOCK_K chunks (tap coordinates and bounds as "
             "row vectors, no div/mod per K element; the weight as (CO, taps, CPG), each chunk contiguous; a packed "
             "(channel, tap) K where a group has fewer than BLOCK_K in-channels)")
COMPILED_IDEA = ("; the shifted kernel's sizes compiled in as constants (one build per input shape, as torch.compile "
                 "builds: the output rows' decoding divides by constants, multiplies and shifts)")
ALL_COMPILED_IDEA = ("; the implicit GEMMs' sizes, strides, padding and dilation compiled in as constants (one build "
                     "per input shape, as torch.compile builds: index divisions by constants, multiplies and shifts)")
OFFSETS_IDEA = ("K loop as offsets: each output row's window origin in x computed once per tile, each K index's "
                "(channel, tap) decoded once per call into a table of input offsets, so a patch element's address is "
                "one add (no div/mod or coordinates per element); bounds masks only where the conv pads; the patch "
                "loaded rows fastest, coalesced along the output's rows (the packed K where a group's input has "
                "2**31 values or more)")


@dataclass(frozen=True)
class GemmTiles(Params):
    """An implicit GEMM's tiles: BLOCK_M output positions x BLOCK_N out-channels per program, BLOCK_K-wide K steps,
    GROUP_M tile rows swizzled together, the tl.dot input precision and the K loop's order (module docstring; "taps"
    only where the family's kernels have the taps loop, TAPS). A family subclasses it to name its formulation in the
    idea text."""

    BLOCK_M: int = 128
    BLOCK_N: int = 128
    BLOCK_K: int = 16
    GROUP_M: int = 8
    num_warps: int = 8
    num_stages: int = 3
    precision: str = "ieee"  # one of PRECISIONS
    k_order: str = "packed"  # one of K_ORDERS
    # the kernels built per input shape, their sizes constexprs: the shifted rows' (conv/shifted.py: kernel), and
    # where the family says so (COMPILED_ALL) every kernel of the move; else only where the move runs the shifted
    # rows (k_order "shifted", or a transposed conv's as_conv)
    compiled_sizes: bool = False

    FORMULATION: ClassVar[str] = "Implicit GEMM: " + GATHER  # opens the exact moves' text
    OUTPUTS: ClassVar[str] = "pixels"  # the GEMM's rows
    GEMM: ClassVar[str] = "implicit GEMM"  # names the formulation in the tensor-core moves' text
    TAPS: ClassVar[bool] = False  # the family's kernels have the taps K loop (k_order "taps" allowed, offered)
    TAPS_IDEA: ClassVar[str] = TAPS_IDEA  # what a taps move's text says of its K loop (and where it stands aside)
    OFFSETS: ClassVar[bool] = False  # the family's kernels have the offsets K loop (k_order "offsets" allowed)
    OFFSETS_IDEA: ClassVar[str] = OFFSETS_IDEA  # what an offsets move's text says of its K loop
    SHIFTED: ClassVar[bool] = False  # the family's kernels have the shifted-rows GEMM (k_order "shifted" allowed)
    SHIFTED_IDEA: ClassVar[str] = ""  # what a shifted move's text says of it
    COMPILED_ALL: ClassVar[bool] = False  # compiled_sizes compiles every kernel of a move in (else the shifted one's)

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown conv precision {self.precision!r}")
        orders = ("packed",) + ("taps",) * self.TAPS + ("offsets",) * self.OFFSETS + ("shifted",) * self.SHIFTED
        if self.k_order not in orders:
            raise ValueError(f"k_order {self.k_order!r} is not one of {type(self).__name__}'s")
        if self.k_order == "shifted" and self.precision != "tf32x3":
            raise ValueError("the shifted-rows GEMM runs 3xTF32 on operands split once: precision 'tf32x3' only")
        if (self.compiled_sizes and not self.COMPILED_ALL and self.k_order != "shifted"
                and not getattr(self, "as_conv", False)):
            raise ValueError("compiled_sizes builds the shifted rows' kernel per shape: a move that runs them only")

    def tile(self) -> str:
        compiled = (ALL_COMPILED_IDEA if self.COMPILED_ALL else COMPILED_IDEA) if self.compiled_sizes else ""
        if self.k_order == "shifted":  # its tiles are chosen per call (SHIFTED_IDEA says how)
            return self.SHIFTED_IDEA + compiled
        loop = {"taps": f"; {self.TAPS_IDEA}", "offsets": f"; {self.OFFSETS_IDEA}"}.get(self.k_order, "")
        return (f"{self.BLOCK_M}x{self.BLOCK_N} output tiles ({self.OUTPUTS} x out-channels), {self.BLOCK_K}-wide K "
                f"steps, {self.num_warps} warps, {self.num_stages} stages{loop}{compiled}")

    def idea(self) -> str:
        if self.precision == "tf32x3":
            return ("3xTF32 tensor cores at fp32 accuracy: each operand split into a TF32 part and a TF32 remainder, "
                    f"three products per step (error ~1e-6 relative); {self.GEMM}, {self.tile()}")
        if self.precision == "tf32":
            return ("TF32 tensor cores (inputs rounded to a 10-bit mantissa, needs a policy that admits TF32): "
                    f"{self.GEMM}, {self.tile()}")
        return (f"{self.FORMULATION}, {self.tile()}, exact fp32 products on the FMA units, bias and epilogue fused "
                "before the one store")

    def category(self) -> str:
        if self.precision == "tf32":
            return "precision"
        if self.k_order in ("taps", "offsets", "shifted"):  # coalesced gathers or TMA boxes, no div/mod per K element
            return "memory"
        if self.precision == "tf32x3":
            return "compute"
        return "memory" if self.BLOCK_M < 128 else "parallelism"  # small tiles: less of x and w per program

    @property
    def relaxed(self) -> bool:
        return self.precision == "tf32"


def gemm_moves(cls: type[GemmTiles]) -> list:
    """The implicit-GEMM families' moves: tiles, exact fp32, 3xTF32 and (relaxed only) TF32; where the family has
    the taps K loop (cls.TAPS), the taps moves right after the first move (3xTF32, then exact fp32, on 32-wide
    channel chunks) and the relaxed TF32 one after the first relaxed move.

    Order and tiles from benchmarks/conv_sweep.py (AlexNet's first layer): K steps of 16 win. The 64x128 tile takes 3
    stages: with 4, Triton 3.6 built it wrong on the H100 (level2/conv2d_add_sigmoid off by 8e-2). The 3xTF32 taps
    move beat the packed first move on most conv/conv3d level-2 problems and lost on some, so it comes second; the
    transposed conv's taps moves take the same places until a sweep of its own. 32-wide chunks halve the taps loop's
    steps at 64+ channels per group. What the order was measured on: conv/evidence.py."""
    def p(m, n, k, w, s, precision, k_order="packed"):
        return cls(BLOCK_M=m, BLOCK_N=n, BLOCK_K=k, GROUP_M=8, num_warps=w, num_stages=s, precision=precision,
                   k_order=k_order)

    taps = [p(128, 128, 32, 8, 3, precision, "taps") for precision in ("tf32x3", "ieee", "tf32")] if cls.TAPS else []
    out = [p(128, 128, 16, 8, 3, "tf32x3"), *taps[:2], p(256, 128, 16, 8, 3, "ieee"), p(256, 128, 16, 8, 3, "tf32x3"),
           p(64, 128, 16, 4, 3, "ieee"), p(128, 128, 32, 8, 3, "ieee")]
    relaxed = [p(m, n, k, w, s, "tf32") for m, n, k, w, s in ((128, 128, 16, 8, 3), (256, 128, 16, 8, 3),
                                                              (64, 128, 16, 4, 3))]
    return out + relaxed[:1] + taps[2:] + relaxed[1:]


def tile_prologue(pid: str = "tl.program_id(0)") -> str:
    """The prologue of the implicit-GEMM kernels: program (tile `pid`, group) -> rows rm x out-channels rn of one
    group, the tiles swizzled GROUP_M rows at a time so neighbouring programs share input rows and weights in L2.
    `pid` is the tile's number (a kernel whose grid axis 0 also walks something else passes its expression)."""
    return f"pid = {pid}\n" + _TILE


_TILE = '''g = tl.program_id(1)
tiles_m = tl.cdiv(M, BLOCK_M)
tiles_n = tl.cdiv(COPG, BLOCK_N)
in_group = GROUP_M * tiles_n
first_m = (pid // in_group) * GROUP_M
group_m = tl.minimum(tiles_m - first_m, GROUP_M)
pid_m = first_m + (pid % in_group) % group_m
pid_n = (pid % in_group) // group_m
rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
co = g * COPG + rn'''
TILE = tile_prologue()


# The taps K loop (module docstring): one run-time loop over (tap, chunk), so that the software pipeline
# (num_stages) runs across taps instead of restarting per tap (a static loop per tap would leave CPG / BLOCK_K steps
# to pipeline and unroll every tap). Coalescing: x is N C spatial, so along the output rows of one channel the input
# is contiguous (or stride-apart) while channels are a plane apart; A is loaded as [BLOCK_K, BLOCK_M], the rows on
# the fast axis (Triton orders a gather's layout by its last axis: a warp then reads one channel's consecutive
# inputs, a few cache lines, not 32 channel planes), and transposed for the dot. The weight, permuted by the forward
# to (CO, taps, CPG), gives a tap's chunk as BLOCK_K contiguous values per out-channel (vector loads, K-major as
# the tensor cores read B), where a channel-major layout would put them a kernel's taps apart, a sector per value.
# (Seen in the TTGIR Triton 3.9 makes for sm_90, not timed: the packed loop's A load spreads a warp over 32 K
# indices of one row, this one over 32 rows of one channel; with CPG a multiple of 16 the B load takes 4-wide
# vectors.)
_TAPS_LOOP = '''chunks = tl.cdiv(CPG, BLOCK_K)
for step in range(0, {taps} * chunks):
    tap = step // chunks{tap_note}
    cin = (step % chunks) * BLOCK_K + tl.arange(0, BLOCK_K)  # the chunk's channels within the group
    cmask = cin < CPG
{coords}
    pmask = mmask{bounds}
    a = tl.load(x_ptr + ({plane})[:, None] + (x_row + {row})[None, :],
                mask=cmask[:, None] & pmask[None, :], other=0.0)
    b = tl.load(w_ptr + co.to(tl.int64)[None, :] * {w_row} + ({w_tap} * CPG + cin)[:, None],
                mask=cmask[:, None] & nmask[None, :], other=0.0)
    acc = tl.dot(tl.trans(a), b, acc, input_precision=PREC)'''


def taps_loop(taps: str, coords: Sequence[tuple[str, str, str]], plane: str, row: str, w_row: str = "K",
              w_tap: str = "tap", tap_note: str = "") -> str:
    """An implicit-GEMM kernel's taps K loop (above): `taps` taps (a kernel expression), each tap's in-channels in
    BLOCK_K chunks. `coords`: per spatial axis (input coordinate, its expression in the tap number `tap` and the
    kernel's names, its extent); `plane` a channel's offset in x in the chunk's channels `cin`, `row` the tap's
    offset within a channel plane, over the rows' start x_row; the weight (CO, taps, CPG) has `w_row` values per
    out-channel and the tap's chunk starts at `w_tap` * CPG (`tap`, or the tap of the whole kernel that a phase's
    tap number stands for). The kernel defines mmask, nmask, co, x_row and acc before it."""
    lines = "\n".join(f"    {name} = {expr}" for name, expr, _ in coords)
    bounds = "".join(f" & ({name} >= 0) & ({name} < {extent})" for name, _, extent in coords)
    note = f"  # {tap_note}" if tap_note else ""
    return _TAPS_LOOP.format(taps=taps, tap_note=note, coords=lines, bounds=bounds, plane=plane, row=row,
                             w_row=w_row, w_tap=w_tap)


# The offsets K loop (module docstring). A is loaded as [BLOCK_K, BLOCK_M], rows on the fast axis (a warp reads
# consecutive outputs' inputs: at stride 1 one or two cache lines a load, where the packed loop's K-fast layout
# spreads a warp over a row's taps, planes apart), and transposed for the dot, as the taps loop does. That layout
# gives each thread one row and BLOCK_K / (warps along K) K indices, the same ones for all 32 lanes of a warp:
# decoded in the loop (div/mod by the kernel's extents, some 30 instructions a K index) they cost more than the
# packed loop (in the SASS Triton 3.9 makes for sm_90, level1/54's conv on 128x64 tiles of 8 warps, 3xTF32: 650
# instructions a thread a step against the packed loop's 532). So the K indices are decoded once per call, by
# `offsets_table`'s kernel, into a table the loop reads (one address a warp; the pipeline prefetches it with the
# patch): then a step runs 334 instructions, an element of A a pointer add and a mask. Table row 0 is the K index's
# input offset from the window origin (int32: the forward takes this loop only where a group's input has fewer than
# 2**31 values), rows 1.. its dilated tap offset along each spatial axis, read only where BOUNDS (the conv pads;
# without padding every tap of an output lies in the input, the output size being what fits, so the mask is rows x
# K alone). The weight stays (CO, K): a step's K indices are consecutive in it.
_OFFSETS_LOOP = '''x_win = x_ptr + x_row + {origin}  # per row: its window's first input (in the padding: masked)
for k0 in range(0, K, BLOCK_K):
    kk = k0 + tl.arange(0, BLOCK_K)
    kmask = kk < K
    delta = tl.load(tab_ptr + kk, mask=kmask, other=0)  # the K index's input offset from the window origin
    amask = kmask[:, None] & mmask[None, :]
    if BOUNDS:  # padding: the taps outside the input read zeros
{bound_lines}
    a = tl.load(x_win[None, :] + delta[:, None], mask=amask, other=0.0)
    b = tl.load(w_ptr + co.to(tl.int64)[None, :] * K + kk[:, None], mask=kmask[:, None] & nmask[None, :],
                other=0.0)
    acc = tl.dot(tl.trans(a), b, acc, input_precision=PREC)'''

# The table's kernel: K indices (channel, taps) packed channel-major, as the weight (CO, CPG, *kernel) is, decoded by
# div/mod once per call; table rows as _OFFSETS_LOOP reads them.
_OFFSETS_TABLE = '''kk = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
kmask = kk < K
c = kk // ({taps})
r = kk % ({taps})
{tap_lines}
tl.store(tab_ptr + kk, c * ({plane}) + {within}, mask=kmask)
{store_lines}'''

OFFSETS_TABLE_BLOCK = 256  # K indices a program of the table's kernel decodes


def _tap_offsets(axes: Sequence[tuple[str, str, str, str, str]]) -> list[tuple[str, str]]:
    """(name, expression) of each axis's dilated tap offset of the K index's tap r (offsets_loop's `axes`)."""
    kernel = [k for _, _, k, _, _ in axes]
    out = []
    for i, (name, _, k, dil, _) in enumerate(axes):
        later = kernel[i + 1:]
        divisor = f"({' * '.join(later)})" if len(later) > 1 else "".join(later)
        out.append((name, "r" + (f" // {divisor}" if later else "") + (f" % {k}" if i else "") + f" * {dil}"))
    return out


def _horner(terms: Sequence[str], extents: Sequence[str]) -> str:
    """((t0 * E1 + t1) * E2 + t2): an offset within a channel plane of `extents` from per-axis `terms`."""
    out = terms[0]
    for extent, term in zip(extents[1:], terms[1:]):
        out = f"({out}) * {extent} + {term}" if " + " in out else f"{out} * {extent} + {term}"
    return out


def offsets_loop(axes: Sequence[tuple[str, str, str, str, str]]) -> str:
    """An implicit-GEMM kernel's offsets K loop (above) over K = (channel, taps) packed channel-major, reading the
    table `offsets_table` fills at tab_ptr. `axes`: per spatial axis, outermost first, (the name of its tap offset,
    the rows' input coordinate of tap 0, the kernel extent constexpr, the dilation, the input extent). The kernel
    defines x_row (the rows' group start in x, int64), mmask, nmask, co and acc before it, and takes tab_ptr and the
    constexpr BOUNDS."""
    bound_lines = []
    for j, (name, origin, _, _, extent) in enumerate(axes):
        row = "K" if j == 0 else f"{j + 1} * K"  # the table's row j + 1
        bound_lines.append(f"        {name} = {origin}[None, :] + tl.load(tab_ptr + {row} + kk, mask=kmask, "
                           f"other=0)[:, None]")
        bound_lines.append(f"        amask = amask & ({name} >= 0) & ({name} < {extent})")
    return _OFFSETS_LOOP.format(origin=_horner([o for _, o, _, _, _ in axes], [e for *_, e in axes]),
                                bound_lines="\n".join(bound_lines))


def offsets_table(axes: Sequence[tuple[str, str, str, str, str]]) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """The run-time parameters, constexprs and body of the kernel that fills `offsets_loop`'s table, int32 of shape
    (1 + len(axes), K), OFFSETS_TABLE_BLOCK K indices a program (`axes` as offsets_loop's)."""
    taps = _tap_offsets(axes)
    stores = [f"tl.store(tab_ptr + {'K' if j == 0 else f'{j + 1} * K'} + kk, {name}, mask=kmask)"
              for j, (name, _) in enumerate(taps)]
    body = _OFFSETS_TABLE.format(taps=" * ".join(k for _, _, k, _, _ in axes),
                                 tap_lines="\n".join(f"{name} = {expr}" for name, expr in taps),
                                 plane=" * ".join(e for *_, e in axes),
                                 within=_horner([n for n, _ in taps], [e for *_, e in axes]),
                                 store_lines="\n".join(stores))
    params = ("tab_ptr", "K", *(e for *_, e in axes), *(d for _, _, _, d, _ in axes))
    return params, (*(k for _, _, k, _, _ in axes), "BLOCK"), body


def hyper_lines(d: dict, names: tuple, spatial: str, padding_strings: bool = True) -> str:
    """Generated lines binding a conv's hyper-parameters: `names` (e.g. ("stride", "dilation")) as tuples of the
    `spatial` axis letters ("(sd, sh, sw,) = ..."), and `groups`; read from the module at run time when the op
    names one (padding through kc_conv_padding, which resolves "same"/"valid", unless not `padding_strings`), else
    the op's values."""
    def var(name):  # ("stride", "hw") -> "(sh, sw,)"; output_padding's letters are "op"
        return "(" + ", ".join({"output_padding": "op"}.get(name, name[0]) + a for a in spatial) + ",)"
    if d.get("module"):
        conv = attr(d["module"])
        resolve = padding_strings and "padding" in names
        lines = [f"{var(n)} = {conv}.{n}" for n in names if n != "padding" or not resolve]
        lines.append(f"groups = {conv}.groups")
        if resolve:  # after the dilation, which "same" padding needs
            kernel = "(" + ", ".join("K" + a.upper() for a in spatial) + ",)"
            lines.append(f"{var('padding')} = kc_conv_padding({conv}.padding, {var('dilation')}, {kernel})")
        return "\n".join(lines)
    groups = attr(d["groups_attr"]) if d.get("groups_attr") else int(d["groups"])
    return "\n".join([f"{var(n)} = {tuple(int(v) for v in d[n])}" for n in names] + [f"groups = {groups}"])


def kc_conv_out_size(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def kc_conv_padding(padding, dilation, kernel):
    """A module's padding as one int per spatial dim ("valid": none; "same": half the dilated kernel, odd extents
    only)."""
    if padding == "valid":
        return tuple(0 for _ in kernel)
    if padding == "same":
        if any(d * (k - 1) % 2 for d, k in zip(dilation, kernel)):
            raise ValueError("padding='same' with an even dilated kernel pads unevenly; not supported")
        return tuple(d * (k - 1) // 2 for d, k in zip(dilation, kernel))
    return tuple(padding)


SIZE_HELPERS = (kc_conv_out_size, kc_conv_padding)  # the forward's output-size helpers, emitted as they are here
