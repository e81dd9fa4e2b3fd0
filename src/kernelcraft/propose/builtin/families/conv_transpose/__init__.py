"""Transposed 2-D convolution family (nn.ConvTranspose2d / F.conv_transpose2d, any stride, padding,
output_padding, dilation and groups, with a pointwise epilogue; nn.ConvTranspose1d as a one-row 2-D one): a
sub-pixel (phase) decomposition into implicit GEMMs that gather.

Input pixel ih feeds output oh = ih*s - p + kh*d, so an output gathers the inputs ih = (oh + p - kh*d) / s for
the taps kh where that division is exact. Which taps those are depends only on the output's phase oh mod s: for
phase r they are kh = f, f + t, f + 2t, ... (t = s / gcd(s, d), f the first solution of kh*d = r + p mod s, none
for some phases when gcd(s, d) > 1), and along the phase's outputs oh = r + s*j the input is ih = j + base - tap*e
(base = (r + p - f*d) / s, e = d*t / s): a dense, stride-1 convolution over only the taps that contribute. So
each phase (rh, rw) is one launch of an implicit GEMM with M = N * (outputs of the phase), N = the out-channels of
a group, K = (in-channels of a group) * (its taps): no zero-inserted input, no MAC on a tap that cannot reach,
and stride 1 is the plain gather formulation (one phase, every tap). A phase no tap reaches gets bias and the
epilogue only (K = 0). The host works out each phase's taps with kc_phase_taps, in plain integers, and the tap
counts are constants of the kernel. The one-launch moves put the phase on the first grid axis instead, fastest,
and work its taps out in the kernel: one launch (and one tail wave) for all stride_h*stride_w phases, at the price
of run-time tap counts in the K decoding; the programs running together compute every phase of the same rows, so
the lines of y they store s apart are filled while in L2 (kernels.py). The first move takes one launch where the
phases' GEMMs are short beside their stores (short_one_launch, kernels.SHORT_PHASES).

The K loop of a phase walks its K in one of two orders (the move's k_order, implicit_gemm.GemmTiles): packed, K
indices decoded into (channel, th, tw) by div/mod over the weight as the module holds it, (C_in, C_out/groups, KH,
KW), the B tile gathered (out-channels strided by KH*KW) from L2; or taps (the conv family's loop,
implicit_gemm.taps_loop), the phase's taps outer, each tap's in-channels in BLOCK_K chunks inner, tap coordinates
and bounds as BLOCK_M vectors, over a weight permuted once per call to (C_out, KH, KW, C_in/groups) so that each
chunk is contiguous. Only the phase's taps are walked: its tap number i stands for the kernel's tap f + i*t, worked
out on the host (or, in one launch, by the kernel once per program), never per K element. The forward takes the taps
loop where a group has at least BLOCK_K in-channels, else the packed one. The moves (implicit_gemm.gemm_moves): the
packed 3xTF32 move first, then the taps moves (3xTF32, exact fp32) where the conv family put them; the one-launch
moves keep the packed loop.

Outputs of a phase are stored s apart along W. The epilogue's parameter operands (x + self.bias, broadcast by
torch's rules) are read at those true output coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kernelcraft.propose.builtin.families.conv.implicit_gemm import COMPILED_IDEA, GemmTiles, gemm_moves
from kernelcraft.propose.builtin.families.conv_transpose import kernels
from kernelcraft.propose.builtin.families.conv_transpose.ops import DETAILS
from kernelcraft.propose.builtin.families.conv_transpose.recognize import RECOGNIZER
from kernelcraft.propose.builtin.family import Family, Names, Rendered
from kernelcraft.propose.builtin.plan import Op

KINDS = ("conv_transpose2d", "conv_transpose1d")


@dataclass(frozen=True)
class ConvTransposeTiles(GemmTiles):
    """Transposed-conv tiles (implicit_gemm.GemmTiles) of a launch per output phase, or of one launch for all
    phases (`one_launch`: the phase and tile on the first grid axis, the phase fastest, its taps worked out in the
    kernel)."""

    one_launch: bool = False
    # short_one_launch: one launch for every phase where the phases' GEMMs are short beside their stores (an output's
    # K, CPG times its mean taps, at most kernels.SHORT_PHASES channel tiles), else a launch per phase
    short_one_launch: bool = False
    # as_conv: where the transposed conv has stride 1 and no output padding (and padding <= dilation * (k - 1)), the
    # plain conv it equals (kernels.py: conv_route): by the conv family's shifted rows where they apply (3xTF32 on a
    # Hopper GPU, one group, more than one tap), else by its packed implicit GEMM; else the phases. With the taps K
    # order the phases keep the taps loop, and the packed GEMM is taken only where planes are large
    # (kernels.AS_CONV_PLANES)
    as_conv: bool = False

    TAPS: ClassVar[bool] = True  # kernels.py has the taps K loop (a phase's taps outer, their in-channels inner)
    FORMULATION: ClassVar[str] = ("Sub-pixel decomposition: one implicit GEMM per output phase (oh, ow mod stride) "
                                  "over only the taps that reach it, inputs gathered straight from x (no "
                                  "zero-inserted buffer)")
    GEMM: ClassVar[str] = "implicit GEMM per output phase"
    TAPS_IDEA: ClassVar[str] = (
        "K loop over the kernel taps, each tap's in-channels in BLOCK_K chunks (tap coordinates and bounds as row "
        "vectors, no div/mod per K element; the weight as (CO, taps, CPG), each chunk contiguous) where a group has "
        f"{kernels.TAPS_MIN_CHUNKS} chunks of in-channels or more; fewer: the packed (channel, tap) K in "
        f"{kernels.PACKED_K}-wide steps")

    def __post_init__(self):
        super().__post_init__()
        if self.short_one_launch and self.one_launch:
            raise ValueError("short_one_launch chooses between one launch and a launch per phase: not with one_launch")
        if self.as_conv and (self.one_launch or self.k_order == "offsets"):
            raise ValueError("as_conv is the conv family's packed K loop in one launch, else the phases' packed or "
                             "taps loop: not with one_launch or offsets")

    def idea(self) -> str:
        if self.as_conv:
            rows = (" by shifted rows where they apply (x copied once into a zero-padded channels-last buffer in "
                    "TF32 parts, each tap's input rows for a tile of outputs one shifted box of it that TMA loads; one "
                    "group, more than one tap, a Hopper GPU), else" if self.precision == "tf32x3" else "")
            return ("Stride 1 as the plain conv it equals: the weight's in- and out-channels swapped and its taps "
                    f"flipped once per call, padded dilation*(k-1)-padding, then{rows} the conv family's implicit GEMM "
                    f"(the weight contiguous along K); {self.tile()}, {_PRODUCTS[self.precision]}; other strides or "
                    "output padding: the per-phase GEMMs" + (f"; {self.TAPS_IDEA}, {_TAPS_PLANES}"
                                                              if self.k_order == "taps" else "")
                    + self._short() + (COMPILED_IDEA if self.compiled_sizes else ""))
        if not self.one_launch:
            return super().idea() + self._short()
        return ("All output phases in one launch (its taps worked out in the kernel), the phase fastest among the "
                "programs, so those running together store every phase of the same outputs' rows and fill y's lines "
                "while they are in L2: no launch and tail wave per phase; "
                f"{self.BLOCK_M}x{self.BLOCK_N} tiles, {self.BLOCK_K}-wide K steps, "
                f"{self.num_warps} warps, {self.num_stages} stages, {_PRODUCTS[self.precision]}"
                + (f"; {self.TAPS_IDEA}" if self.k_order == "taps" else ""))

    def _short(self) -> str:
        """What a short_one_launch move says of its choice."""
        return ("" if not self.short_one_launch else
                "; where the phases' GEMMs are short beside their stores (a group's in-channels times an output's "
                f"mean taps at most {kernels.SHORT_PHASES:g} channel tiles), every phase in one launch, the phase "
                "fastest among the programs, so that together they fill y's lines while those are in L2")

    def category(self) -> str:
        if self.as_conv:
            return "memory"  # the weight read along K, as the conv family reads it
        return "parallelism" if self.one_launch and not self.relaxed else super().category()


_TAPS_PLANES = (f"the plain conv only on input planes of {kernels.AS_CONV_PLANES[0]} elements or more, and where "
                f"the taps loop would run on planes of {kernels.AS_CONV_PLANES[1]} or more (smaller: the per-phase "
                "GEMMs' taps loop, whose channel chunks then lie close together)")
_PRODUCTS = {"tf32x3": "3xTF32 tensor cores at fp32 accuracy", "ieee": "exact fp32 on the FMA units",
             "tf32": "TF32 tensor cores (inputs rounded to a 10-bit mantissa, needs a policy that admits TF32)"}


def moves(op: Op) -> list[ConvTransposeTiles]:
    """The implicit-GEMM moves with the 3xTF32 taps move first; a taps move runs the packed K loop, in the first
    packed move's 16-wide steps, where a group has fewer than kernels.TAPS_MIN_CHUNKS chunks of in-channels (there the
    packed loop was faster). Where the op has stride 1 and no output padding, the conv it equals (as_conv) in two
    moves: first the taps move that takes it where input planes are large (kernels.AS_CONV_PLANES), then the packed
    one that takes it at every size; the conv family's shifted rows take it wherever they apply. The first move's
    phases run in one launch where their GEMMs are short beside their stores (short_one_launch,
    kernels.SHORT_PHASES). What each choice was measured on: evidence.py."""
    out = gemm_moves(ConvTransposeTiles)
    first = next(i for i, p in enumerate(out) if p.k_order == "taps" and p.precision == "tf32x3")
    out = [out[first].but(short_one_launch=True), *out[:first], *out[first + 1:]]
    d = op.detail
    if list(d.get("stride") or ()) == [1, 1] and not any(d.get("output_padding") or ()):
        out = [out[0].but(as_conv=True), out[0], ConvTransposeTiles(precision="tf32x3", as_conv=True), *out[1:]]
    at = next(i for i, p in enumerate(out) if p.precision == "tf32")  # before the relaxed-only moves
    one = ConvTransposeTiles(BLOCK_M=128, BLOCK_N=128, BLOCK_K=16, GROUP_M=8, num_warps=8, num_stages=3,
                             one_launch=True)
    return out[:at] + [one.but(precision="tf32x3"), one.but(precision="ieee")] + out[at:]


def render(op: Op, p: ConvTransposeTiles, names: Names) -> Rendered:
    return kernels.render(op, p, names)


FAMILY = Family("conv_transpose", "triton", KINDS, ConvTransposeTiles, moves, render, epilogue=KINDS,
                cut={"conv": ("conv_transpose1d", "conv_transpose2d")},
                operand_epilogue=KINDS, recognize=RECOGNIZER,
                details=DETAILS)
