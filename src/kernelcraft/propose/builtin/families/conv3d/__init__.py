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

    Not timed when ordered; by the SASS Triton 3.9 makes for sm_90 (level1/54's conv: 3 in-channels, K 81, 128x64
    tiles of 8 warps, 3xTF32): the packed loop's step runs 532 instructions a thread, the offsets loop's 334 (16-wide
    steps, 120 registers) or 514 (32-wide, 168 registers: one program an SM where 16-wide steps fit two), 120 of
    them 3xTF32's own (splitting, the NaN guard, adding the partial products). At 32+ in-channels per group the taps
    moves (second, third) read each chunk of a tap with no table at all. 16- and 32-wide steps pad K = 27, 81, 216,
    315 alike (32, 96, 224, 320); one step of next_power_of_2(K) (81 -> 128) would waste a third of the dot and
    double the registers a thread holds of A.

    Timed since (H100, published sizes): the first move's wide_m, 256x64 tiles where the out-channels narrow the
    channel tile to 64, took every such conv3d in KernelBench 1.11-1.37x faster: level 1's 54, 59, 60 and 66 (3
    in-channels) and level 2's 43, 47 and 90 (kernelbench-level{1,2}-conv3d256-h100-2026-11-27.json). 256-voxel tiles
    on 16-, 24- and 32-wide channel tiles were 2-22% slower (level 2's 6, 7, 8, 23, 24, 27, 48, 79, 83), so those
    keep 128.

    The shifted rows (conv/shifted.py) lead, that first move their fallback: they take a conv3d of stride 1 (or
    strides that fold into the channels), one group, more than one tap and more than 8 in-channels (3xTF32 on a
    Hopper GPU). On an H100 they took level 2's 43
    5.05 -> 3.57 ms and 47 7.03 -> 3.70 (0.72 -> 1.37x torch.compile; kernelbench-level2-shifted-h100-2026-11-27.json);
    at 3 in-channels (level 1's 54, 59, 60, 66) they lost to the offsets loop, which keeps those (shifted.py).

    The first move sets compiled_sizes: each kernel built per input shape, its sizes constexprs. For sm_90a at 54's
    and 59's sizes the offsets kernel's 3,024 instructions become 1,240 and 952, most of them the epilogue's index
    work (benchmarks/results/sass-shifted-compiled-2026-11-27.log); timed on an H100 against the same move without it
    (params-probe-compiled-h100-2026-11-27.json) 54 2.29 -> 2.11 ms, 59 3.09 -> 2.66, 60 5.04 -> 4.86, 66 2.55 ->
    2.46. The second move is the first's fallback without it (one build for every shape)."""
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
