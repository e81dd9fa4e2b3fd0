"""Convolution family (conv2d and conv1d, any stride/padding/dilation/groups, with a pointwise epilogue): implicit
GEMM. A 1-D convolution runs as a 2-D one over one-row images (views of x and the weight, no copy).

The convolution is a GEMM that is never materialized: M = N*OH*OW output pixels, N = the out-channels of a
group, K = (in-channels of a group)*KH*KW. A program owns a BLOCK_M x BLOCK_N tile of outputs (GROUP_M
swizzle over tiles so neighbouring programs share input rows and weights in L2); each K step gathers the
BLOCK_M x BLOCK_K patch of the input it needs straight from x (padding is a mask, no im2col buffer) and the
matching weights, and accumulates tl.dot in fp32. Bias, an eval batchnorm that follows (folded in: a
per-channel scale and shift from its running statistics) and the pointwise steps after them in the reference
(relu, gelu, scaling, x + self.bias, ...) are applied to the fp32 tile before its only store. A pooling
that follows (conv -> relu -> max-pool) is the pool family's kernel over the conv's output, launched next.

The K loop walks K in one of two orders (the move's k_order): packed, K indices decoded into (channel, kh, kw) by
div/mod, or taps, the kernel's taps outer and each tap's in-channels in BLOCK_K chunks inner over a weight permuted
to (CO, KH, KW, CPG) (the forward takes it where a group has at least BLOCK_K in-channels, else the packed one).
A third formulation, shifted (shifted.py, the first move), reads no gather at all: at stride 1 the input a tap
adds to the output at a padded position m is row m + shift(tap) of x copied once into a zero-padded channels-last
buffer, so TMA loads each step's operands as boxes; x and the weight are split once into TF32 parts on the way.

A depthwise convolution (groups == in == out channels) is no GEMM: it takes a direct stencil kernel instead,
a program per (image, channel) plane tile with the taps unrolled, in fp32.

implicit_gemm.py holds what the implicit-GEMM families share (tiles, moves, the tile prologue, hyper-parameter
lines, size helpers; conv3d and conv_transpose build on it), operands.py the epilogue's parameter operands every
convolution family reads at its output's coordinates, kernels.py this family's kernels and forward, recognize.py
how nn.Conv1d/Conv2d and F.conv1d/conv2d are read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kernelcraft.propose.builtin.families.conv import kernels
from kernelcraft.propose.builtin.families.conv.implicit_gemm import GemmTiles, gemm_moves
from kernelcraft.propose.builtin.families.conv.ops import DETAILS
from kernelcraft.propose.builtin.families.conv.recognize import RECOGNIZER
from kernelcraft.propose.builtin.family import Family, Names, Rendered
from kernelcraft.propose.builtin.plan import Op

KINDS = ("conv2d", "conv1d")


@dataclass(frozen=True)
class ConvTiles(GemmTiles):
    """conv2d / conv1d tiles (implicit_gemm.GemmTiles); a depthwise conv takes its stencil kernel on any of them."""

    TAPS: ClassVar[bool] = True  # kernels.py has the taps K loop
    SHIFTED: ClassVar[bool] = True  # kernels.py has the shifted-rows GEMM
    COMPILED_ALL: ClassVar[bool] = True  # compiled_sizes compiles its GEMMs in (kernels.py: SIZES)
    SHIFTED_IDEA: ClassVar[str] = (
        "stride 1 as shifted rows (a stride folded into the channels on the copy, space to depth, where the folded "
        "kernel holds at most 1.5 times the taps): x copied once into a zero-padded channels-last buffer split into "
        "TF32 parts, so each tap's input rows for a tile of outputs are one shifted box of it that TMA loads as it "
        "lies (the weight likewise as (CO, taps, C)), three TF32 products a step, outputs in the padding computed and "
        "dropped; tiles per call: 128 outputs x 64 out-channels on 4 warps for up to 64 out-channels, else x 128 on "
        "8, K steps of 16 channels for up to 16 in-channels, else 32; on a Hopper GPU for fp32, one group and more "
        "than one tap (folded); else, for fp32 with at most 4 in-channels a group, 17 or more values of K and a "
        "pointwise epilogue, a direct kernel of outer products in fp32 FMAs over the taps (conv/direct.py); else the "
        "packed implicit GEMM on 128 x 128 tiles, 16-wide K steps, 8 warps")


def moves(op: Op) -> list[ConvTiles]:
    """The shifted-rows GEMM first, then the implicit-GEMM moves (implicit_gemm.gemm_moves). The shifted rows beat the
    packed 3xTF32 move on stride-1 convs of more than one tap and lost on a 1x1 one, which they leave to the packed
    GEMM, as they leave strides that do not fold (shifted.FOLD_WASTE), groups, 16-bit inputs and GPUs without TMA:
    there the first move is the packed move it replaced, on the same tiles. The first move compiles its kernels per
    input shape (compiled_sizes: sizes, strides, padding and dilation as constexprs, the packed fallback's too). What
    each choice was measured on: evidence.py."""
    return [ConvTiles(precision="tf32x3", k_order="shifted", compiled_sizes=True), *gemm_moves(ConvTiles)]


def render(op: Op, p: ConvTiles, names: Names) -> Rendered:
    return kernels.render(op, p, names)


FAMILY = Family("conv", "triton", KINDS, ConvTiles, moves, render, epilogue=KINDS, operand_epilogue=KINDS,
                cut={"conv": ("conv1d", "conv2d", "convolution")},
                recognize=RECOGNIZER,
                details=DETAILS)
