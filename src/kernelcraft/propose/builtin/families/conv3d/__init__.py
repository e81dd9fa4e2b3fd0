"""3-D convolution family (nn.Conv3d / F.conv3d, any stride/padding/dilation/groups, with a pointwise epilogue):
implicit GEMM, the conv family's kernel with one more spatial axis.

M = N*OD*OH*OW output voxels, N = the out-channels of a group, K = (in-channels of a group)*KD*KH*KW. A program
owns a BLOCK_M x BLOCK_N tile (the conv family's swizzled prologue, implicit_gemm.TILE); each K step decodes its K
indices into (channel, kd, kh, kw), gathers the BLOCK_M x BLOCK_K patch straight from x (padding as a mask, no
im2col buffer) and the matching weights (contiguous along K), and accumulates tl.dot in fp32 at the move's
precision; or (k_order "taps", where a group has at least BLOCK_K in-channels) walks the taps (kd, kh, kw) outer
and each tap's in-channels in BLOCK_K chunks inner, over a weight permuted to (CO, KD, KH, KW, CPG), with no div/mod
per K element; or (k_order "offsets") walks the packed K with each patch element's input offset split into its
row's window origin (once per tile) and its K index's channel-and-tap offset (decoded once per call into a small
table by a kernel of its own), bounds masks only where the conv pads, the patch loaded rows fastest
(implicit_gemm.offsets_loop), except in a padded conv whose groups have kernels.TAPS_FIRST in-channels or more:
there an offsets move runs the taps loop in chunks of that many. Bias and the pointwise steps after the conv (with
the parameter tensors they read, x + self.bias, at the output's coordinates) are applied to the fp32 tile before
its only store, in the tile's own orientation (kernels.py: a transposed store measured slower on every move).
Depthwise 3-D convs run on the same grouped GEMM (no stencil kernel of their own: correct, though most of a
BLOCK_N tile idles).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kernelcraft.propose.builtin.families.conv.implicit_gemm import GATHER, OFFSETS_IDEA, GemmTiles, gemm_moves
from kernelcraft.propose.builtin.families.conv3d import kernels
from kernelcraft.propose.builtin.families.conv3d.ops import DETAILS
from kernelcraft.propose.builtin.families.conv3d.recognize import RECOGNIZER
from kernelcraft.propose.builtin.family import Family, Names, Rendered
from kernelcraft.propose.builtin.plan import Op


@dataclass(frozen=True)
class Conv3dTiles(GemmTiles):
    """conv3d tiles: output voxels x out-channels (implicit_gemm.GemmTiles)."""

    FORMULATION: ClassVar[str] = "Implicit GEMM over (N, D, H, W) outputs: " + GATHER
    OUTPUTS: ClassVar[str] = "voxels"
    GEMM: ClassVar[str] = "3-D implicit GEMM"
    TAPS: ClassVar[bool] = True  # kernels.py has the taps K loop
    OFFSETS: ClassVar[bool] = True  # and the offsets K loop
    SHIFTED: ClassVar[bool] = True  # and the shifted-rows GEMM (conv/shifted.py)
    COMPILED_ALL: ClassVar[bool] = True  # compiled_sizes compiles each of its kernels in (kernels.py: SIZES)
    SHIFTED_IDEA: ClassVar[str] = (
        "stride 1 as shifted rows (a stride folded into the channels on the copy, space to depth, where the folded "
        "kernel holds at most 1.5 times the taps): x copied once into a zero-padded channels-last buffer split into "
        "TF32 parts, so each tap's input rows for a tile of output voxels are one shifted box of it that TMA loads as "
        "it lies (the weight likewise as (CO, taps, C)), three TF32 products a step, outputs in the padding computed "
        "and dropped; tiles per call: 128 voxels x 64 out-channels on 4 warps for up to 64 out-channels, else x 128 "
        "on 8, K steps of 16 channels for up to 16 in-channels, else 32; on a Hopper GPU for fp32, one group, more "
        "than one tap and more than 8 in-channels (folded); else, for fp32 with at most 4 in-channels a group, up to "
        "81 values of K and a pointwise epilogue, a direct kernel of outer products in fp32 FMAs over the taps "
        "(conv/direct.py); else the first move's offsets K loop")
    OFFSETS_IDEA: ClassVar[str] = (OFFSETS_IDEA + f"; where the conv pads and a group has {kernels.TAPS_FIRST}+ "
                                   f"in-channels, the taps K loop in {kernels.TAPS_FIRST}-wide channel chunks instead "
                                   "(its bounds checks are per tap, not per element)")

    # wide_m: where a group's out-channels (33 to BLOCK_N/2 of them) narrow the channel tile to BLOCK_N/2, the voxel
    # tile doubles to 2*BLOCK_M, so a tile keeps its area; chosen when forward runs (the forward's channel tile)
    wide_m: bool = False

    def tile(self) -> str:
        if not self.wide_m:
            return super().tile()
        return (f"{super().tile()}; where a group's out-channels narrow the channel tile to {self.BLOCK_N // 2}, "
                f"{2 * self.BLOCK_M}-voxel tiles (the same area)")


def moves(op: Op) -> list[Conv3dTiles]:
    """The shifted rows first (below), then implicit_gemm.gemm_moves with the offsets K loop's moves: 3xTF32 on 16-wide
    K steps first (the packed first move's tiles, its loop's per-element index work cut to an add and a mask), 32-wide
    steps and exact fp32 after the two taps moves, then the packed moves; a relaxed TF32 one before the first relaxed
    packed move.

    Ordered by the SASS Triton 3.9 makes for sm_90, not by timings (level1/54's conv, 128x64 tiles of 8 warps,
    3xTF32): the offsets loop's step runs 334 instructions a thread at 16-wide steps against the packed loop's 532;
    32-wide steps take more registers (one program an SM where 16-wide steps fit two). At 32+ in-channels per group
    the taps moves (second, third) read each chunk of a tap with no table at all. 16- and 32-wide steps pad K = 27,
    81, 216, 315 alike (32, 96, 224, 320); one step of next_power_of_2(K) (81 -> 128) would waste a third of the dot
    and double the registers a thread holds of A.

    The first move's wide_m takes 256x64 tiles where the out-channels narrow the channel tile to 64 (faster on every
    such conv3d; 256-voxel tiles on narrower channel tiles were slower, so those keep 128). The shifted rows
    (conv/shifted.py) lead, that first move their fallback: they take a conv3d of stride 1 (or strides that fold into
    the channels), one group, more than one tap and more than 8 in-channels (3xTF32 on a Hopper GPU); at 3
    in-channels they lost to the offsets loop, which keeps those (shifted.py). The first move sets compiled_sizes:
    each kernel built per input shape, its sizes constexprs, the epilogue's index work mostly gone. The second move is
    the first's fallback without it (one build for every shape). What each choice was measured on: evidence.py."""
    base = gemm_moves(Conv3dTiles)
    first = base[0]  # 128x128x16, 3xTF32, packed
    offsets = first.but(k_order="offsets")
    later = [offsets.but(BLOCK_K=32), offsets.but(precision="ieee")]
    relaxed = next(i for i, p in enumerate(base) if p.precision == "tf32")
    strict = [offsets.but(wide_m=True, k_order="shifted", compiled_sizes=True), offsets.but(wide_m=True), *base[1:3],
              *later, first, *base[3:relaxed]]
    return strict + [offsets.but(precision="tf32"), *base[relaxed:]]


def render(op: Op, p: Conv3dTiles, names: Names) -> Rendered:
    return kernels.render(op, p, names)


FAMILY = Family("conv3d", "triton", ("conv3d",), Conv3dTiles, moves, render, epilogue=("conv3d",),
                cut={"conv": ("conv3d",)},
                operand_epilogue=("conv3d",), recognize=RECOGNIZER,
                details=DETAILS)
