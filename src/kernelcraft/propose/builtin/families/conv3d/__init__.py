"""3-D convolution family (nn.Conv3d / F.conv3d, any stride/padding/dilation/groups, with a pointwise epilogue):
implicit GEMM, the conv family's kernel with one more spatial axis.

M = N*OD*OH*OW output voxels, N = the out-channels of a group, K = (in-channels of a group)*KD*KH*KW. A program
owns a BLOCK_M x BLOCK_N tile (the conv family's swizzled prologue, implicit_gemm.TILE); each K step decodes its K
indices into (channel, kd, kh, kw), gathers the BLOCK_M x BLOCK_K patch straight from x (padding as a mask, no
im2col buffer) and the matching weights (contiguous along K), and accumulates tl.dot in fp32 at the move's
precision; or (k_order "taps", where a group has at least BLOCK_K in-channels) walks the taps (kd, kh, kw) outer
and each tap's in-channels in BLOCK_K chunks inner, over a weight permuted to (CO, KD, KH, KW, CPG), with no div/mod
per K element. Bias and the pointwise steps after the conv (with the parameter tensors they read, x + self.bias, at
the output's coordinates) are applied to the fp32 tile before its only store.
Depthwise 3-D convs run on the same grouped GEMM (no stencil kernel of their own: correct, though most of a
BLOCK_N tile idles).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kernelcraft.propose.builtin.families.conv.implicit_gemm import GATHER, GemmTiles, gemm_moves
from kernelcraft.propose.builtin.families.conv3d import kernels
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


def moves(op: Op) -> list[Conv3dTiles]:
    return gemm_moves(Conv3dTiles)


def render(op: Op, p: Conv3dTiles, names: Names) -> Rendered:
    return kernels.render(op, p, names)


FAMILY = Family("conv3d", "triton", ("conv3d",), Conv3dTiles, moves, render, epilogue=("conv3d",),
                operand_epilogue=("conv3d",), recognize=RECOGNIZER)
