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
a group has at least BLOCK_K in-channels (fewer: the packed K wastes less of each step).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from kernelcraft.propose.builtin.codegen import attr
from kernelcraft.propose.builtin.family import Params

GATHER = "gather input patches straight from x (padding as a mask, no im2col buffer)"
PRECISIONS = ("ieee", "tf32x3", "tf32")
K_ORDERS = ("packed", "taps")
TAPS_IDEA = ("K loop over the kernel taps, each tap's in-channels in BLOCK_K chunks (tap coordinates and bounds as "
             "row vectors, no div/mod per K element; the weight as (CO, taps, CPG), each chunk contiguous; a packed "
             "(channel, tap) K where a group has fewer than BLOCK_K in-channels)")


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

    FORMULATION: ClassVar[str] = "Implicit GEMM: " + GATHER  # opens the exact moves' text
    OUTPUTS: ClassVar[str] = "pixels"  # the GEMM's rows
    GEMM: ClassVar[str] = "implicit GEMM"  # names the formulation in the tensor-core moves' text
    TAPS: ClassVar[bool] = False  # the family's kernels have the taps K loop (k_order "taps" allowed, offered)
    TAPS_IDEA: ClassVar[str] = TAPS_IDEA  # what a taps move's text says of its K loop (and where it stands aside)

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown conv precision {self.precision!r}")
        if self.k_order not in (K_ORDERS if self.TAPS else K_ORDERS[:1]):
            raise ValueError(f"k_order {self.k_order!r} is not one of {type(self).__name__}'s")

    def tile(self) -> str:
        taps = f"; {self.TAPS_IDEA}" if self.k_order == "taps" else ""
        return (f"{self.BLOCK_M}x{self.BLOCK_N} output tiles ({self.OUTPUTS} x out-channels), {self.BLOCK_K}-wide K "
                f"steps, {self.num_warps} warps, {self.num_stages} stages{taps}")

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
        if self.k_order == "taps":  # coalesced gathers, contiguous weight chunks, no div/mod per K element
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

    Order and tiles from benchmarks/conv_sweep.py on an H100 (AlexNet's first layer): K steps of 16 win. The 64x128
    tile takes 3 stages: with 4, Triton 3.6 built it wrong on the H100 (level2/conv2d_add_sigmoid off by 8e-2). The
    3xTF32 taps move beat the packed first move on 5 of 7 conv/conv3d level-2 problems and lost on 2
    (benchmarks/results/README.md, "Level 2 at published sizes"), so it comes second; the transposed conv's taps
    moves take the same places until a sweep of its own. 32-wide chunks halve the taps loop's steps at 64+ channels
    per group."""
    def p(m, n, k, w, s, precision, k_order="packed"):
        return cls(BLOCK_M=m, BLOCK_N=n, BLOCK_K=k, GROUP_M=8, num_warps=w, num_stages=s, precision=precision,
                   k_order=k_order)

    taps = [p(128, 128, 32, 8, 3, precision, "taps") for precision in ("tf32x3", "ieee", "tf32")] if cls.TAPS else []
    out = [p(128, 128, 16, 8, 3, "tf32x3"), *taps[:2], p(256, 128, 16, 8, 3, "ieee"), p(256, 128, 16, 8, 3, "tf32x3"),
           p(64, 128, 16, 4, 3, "ieee"), p(128, 128, 32, 8, 3, "ieee")]
    relaxed = [p(m, n, k, w, s, "tf32") for m, n, k, w, s in ((128, 128, 16, 8, 3), (256, 128, 16, 8, 3),
                                                              (64, 128, 16, 4, 3))]
    return out + relaxed[:1] + taps[2:] + relaxed[1:]


# The prologue of the implicit-GEMM kernels: program (tile, group) -> rows rm x out-channels rn of one group, the
# tiles swizzled GROUP_M rows at a time so neighbouring programs share input rows and weights in L2.
TILE = '''pid = tl.program_id(0)
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
co = g * COPG + rn'''


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
