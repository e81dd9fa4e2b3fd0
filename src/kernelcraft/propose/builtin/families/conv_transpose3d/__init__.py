"""Transposed 3-D convolution family (nn.ConvTranspose3d, F.conv_transpose3d; any stride, padding, output_padding,
dilation and groups, with or without bias, batched (N, C, D, H, W) or unbatched (C, D, H, W) inputs, fp32 or
16-bit, with the pointwise ops that follow fused into the epilogue, the parameter tensors they read (x + self.bias)
too, at the outputs' coordinates): a sub-pixel (phase) decomposition into implicit GEMMs that gather their inputs
straight from x, so no work goes to the zeros a stride would insert.

Along each axis an input i feeds the outputs o = i*s - p + k*d (k the tap), so an output o gathers the inputs
(o + p - k*d) / s for the taps k where that division is exact; which taps those are depends only on the output's
phase o mod s. For each phase (rd, rh, rw) the contributing taps form an arithmetic run per axis, and the phase's
outputs are a dense, stride-1 convolution over those taps: an implicit GEMM with M = N * (outputs of the phase),
N = the out-channels of a group, K = (in-channels of a group) * (its taps). A phase no tap reaches gets bias and
the epilogue only. kernels.py has the axis arithmetic, the kernels and the host code.

Moves: output tiles (voxels of a phase x out-channels) and K steps, a launch per phase or every phase in one
launch, and the tl.dot precision: 3xTF32 ("tf32x3", fp32-grade accuracy on the tensor cores, first: faster than
the exact moves, evidence.py), exact fp32 ("ieee") and TF32 ("tf32", relaxed: offered only under a policy that admits
it). 16-bit inputs take the tensor cores as they are on every move. Each move is right on any shape.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.families.conv.implicit_gemm import COMPILED_IDEA
from kernelcraft.propose.builtin.families.conv_transpose3d import kernels
from kernelcraft.propose.builtin.families.conv_transpose3d.ops import DETAILS
from kernelcraft.propose.builtin.families.conv_transpose3d.recognize import RECOGNIZER
from kernelcraft.propose.builtin.family import Family, Names, Params, Rendered
from kernelcraft.propose.builtin.plan import Op

PRECISIONS = ("ieee", "tf32x3", "tf32")


@dataclass(frozen=True)
class Tiles(Params):
    BLOCK_M: int = 128  # output voxels of one phase per tile
    BLOCK_N: int = 128  # out-channels per tile (capped at the group's, rounded up to a power of two, at least 16)
    BLOCK_K: int = 16  # (in-channel, tap) pairs per K step
    GROUP_M: int = 8  # tiles swizzled GROUP_M rows at a time, so neighbouring programs share inputs in L2
    num_warps: int = 8
    num_stages: int = 3
    precision: str = "ieee"  # tl.dot's input precision for fp32 inputs: "ieee" | "tf32x3" | "tf32"
    one_launch: bool = False  # every phase in one launch (the phase a grid axis), else a launch per phase
    # as_conv: where the transposed conv has stride 1, no output padding, one group and padding <= dilation * (k -
    # 1), the plain conv it equals on the conv3d family's shifted-rows GEMM where that applies (kernels.py:
    # conv_route); else the phases of the other fields
    as_conv: bool = False
    # as_conv's shifted kernel built per input shape, its sizes constexprs. No move sets it: it saved no time where
    # timed (evidence.py)
    compiled_sizes: bool = False

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision {self.precision!r} is not one of {PRECISIONS}")
        if self.as_conv and (self.precision != "tf32x3" or self.one_launch):
            raise ValueError("as_conv is the shifted-rows GEMM at 3xTF32, else the per-phase GEMMs: precision "
                             "'tf32x3' and a launch per phase only")
        if self.compiled_sizes and not self.as_conv:
            raise ValueError("compiled_sizes builds the shifted rows' kernel per shape: an as_conv move only")

    @property
    def relaxed(self) -> bool:
        return self.precision == "tf32"

    def idea(self) -> str:
        tiles = (f"{self.BLOCK_M}x{self.BLOCK_N} output tiles (voxels of a phase x out-channels), {self.BLOCK_K}-wide "
                 f"K steps, {self.num_warps} warps, {self.num_stages} stages")
        if self.one_launch:
            how = ("All output phases of the transposed 3-D conv in one launch (the phase a grid axis, its taps "
                   "worked out in the kernel): no launch and tail wave per phase")
        else:
            how = ("Sub-pixel decomposition of the transposed 3-D conv: one implicit GEMM per output phase (od, oh, "
                   "ow mod stride) over only the taps that reach it, inputs gathered straight from x (no "
                   "zero-inserted buffer)")
        math = {"ieee": "exact fp32 products on the FMA units",
                "tf32x3": ("3xTF32 tensor cores at fp32 accuracy (each operand split into a TF32 part and a TF32 "
                           "remainder, three products per step)"),
                "tf32": "TF32 tensor cores (inputs rounded to a 10-bit mantissa, needs a policy that admits TF32)"}
        phases = f"{how}; {tiles}; {math[self.precision]}; bias and epilogue fused before the one store"
        if not self.as_conv:
            return phases
        return ("Stride 1 as the plain conv it equals (the weight's in- and out-channels swapped and its taps flipped "
                "once per call, padded dilation*(k-1)-padding), by shifted rows: x copied once into a zero-padded "
                "channels-last buffer split into TF32 parts, each tap's input rows for a tile of output voxels one "
                "shifted box of it that TMA loads as it lies, three TF32 products a step; on a Hopper GPU for fp32, "
                f"one group, more than one tap and more than 8 in-channels; elsewhere: {phases[0].lower()}{phases[1:]}"
                + (COMPILED_IDEA if self.compiled_sizes else ""))

    def category(self) -> str:
        if self.as_conv:
            return "memory"
        if self.precision == "tf32":
            return "precision"
        if self.precision == "tf32x3":
            return "compute"
        return "memory" if self.BLOCK_M <= 64 else "parallelism"


def moves(op: Op) -> list[Tiles]:
    """3xTF32 first, on the default tiles and on 128x64 tiles of 4 warps and 4 stages (the fastest in a sweep of
    tiles); then exact fp32, one launch for every phase, other tile shapes (a narrow M tile for small volumes, wider K
    steps), and the relaxed TF32 moves last. Where the op has stride 1 and no output padding, the conv it equals by
    shifted rows (as_conv) comes first (much faster than the phases where timed), its fallback the first move's
    phases. What the order was measured on: evidence.py."""
    out = [Tiles(precision="tf32x3"), Tiles(128, 64, 16, num_warps=4, num_stages=4, precision="tf32x3"), Tiles(),
           Tiles(precision="tf32x3", one_launch=True), Tiles(one_launch=True), Tiles(64, 128, 16, num_warps=4),
           Tiles(128, 128, 32), Tiles(precision="tf32"), Tiles(64, 128, 16, num_warps=4, precision="tf32")]
    d = op.detail
    if list(d.get("stride") or ()) == [1, 1, 1] and not any(d.get("output_padding") or ()):
        out.insert(0, out[0].but(as_conv=True))
    return out


def render(op: Op, p: Tiles, names: Names) -> Rendered:
    return kernels.render(op, p, names)


FAMILY = Family("conv_transpose3d", "triton", ("conv_transpose3d",), Tiles, moves, render,
                cut={"conv": ("conv_transpose3d",)},
                epilogue=("conv_transpose3d",), operand_epilogue=("conv_transpose3d",), recognize=RECOGNIZER,
                details=DETAILS)
