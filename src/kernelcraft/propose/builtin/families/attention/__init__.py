"""Attention family: softmax(q @ k^T * scale [+ causal mask | + a held bias]) @ v over the forward's first three
inputs, q (..., L, E), k (..., S, E) and v (..., S, Ev), as one FlashAttention-style kernel (the L x S scores never
reach memory).

A program owns a BLOCK_M tile of queries of one batch·head (a 1-D grid; each tensor read through its own batch and
head strides, so the transposed head split of a projection's output is no copy, and the output laid out as q is, so
its heads merge back with no copy either) and walks the keys in BLOCK_N tiles: scores by tl.dot, an online softmax
(running max and sum in fp32, base-2 exponentials with log2 e folded into the scale), the output tile accumulated in fp32 and rescaled whenever the running max grows, divided by
the sum once at the end. Causal attention is torch's top-left alignment (key j is seen by query i iff j <= i, for
any L and S): key tiles wholly past a query tile's diagonal are never visited, those on it are masked, the rest run
unmasked. Ragged L, S, E and Ev are masks (E and Ev padded to powers of two, at least 16 and 32, as constexprs); every size
and the scale (1/sqrt(E) unless the reference gives one) are read at run time. Heads too wide for the kernel's
registers take, at run time, an unfused path (unfused.py): the scores by a tiled GEMM, a row softmax, p @ v.

Precision: fp16/bf16 inputs take the tensor cores with fp32 accumulation (the probabilities are rounded to the
input dtype before the product with v, as torch's own fused kernels do). For fp32 inputs "ieee" is exact fp32,
"tf32x3" keeps fp32-grade accuracy on the tensor cores (three TF32 products per tile), "tf32" rounds the inputs to
TF32 and is offered only under a tolerance policy that admits it (a relaxed move).
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.families.attention import kernels, unfused
from kernelcraft.propose.builtin.families.attention.ops import DETAILS
from kernelcraft.propose.builtin.families.attention.recognize import RECOGNIZER
from kernelcraft.propose.builtin.family import Family, Names, Params, Rendered
from kernelcraft.propose.builtin.plan import Op

_PRECISION = {  # what each precision does to fp32 inputs, in a move's words
    "ieee": "fp32 inputs exact (ieee products), fp16/bf16 on tensor cores with fp32 accumulation",
    "tf32x3": ("fp32 inputs as 3xTF32 on tensor cores (each operand a TF32 part plus a TF32 remainder, ~1e-6 "
               "relative), fp16/bf16 on tensor cores with fp32 accumulation"),
    "tf32": ("TF32 tensor cores for fp32 inputs (rounded to a 10-bit mantissa), so it needs a tolerance policy that "
             "admits TF32; fp16/bf16 inputs are unaffected"),
}
_FOLD = ("the softmax scale (times log2 e) folded into the fp32 query tile once when it is loaded, so no score needs "
         "a multiply (fp16/bf16 inputs scale the scores: a 16-bit tile rounded after scaling would put an error of "
         "1e-3 relative on every score)")

_WIDE = (f"; heads too wide for the kernel's registers (a padded query row over {unfused.Q_ROW_BYTES} bytes or an fp32 "
         f"accumulator row over {unfused.ACC_ROW_BYTES}) take three kernels instead: the scores by a tiled GEMM into "
         "memory, a softmax over each row of them, p @ v by the tiled GEMM, products at the same precision (3xTF32 "
         "or TF32 fp32 inputs on a Hopper GPU: both GEMMs fed by TMA, v copied once K-major)")


@dataclass(frozen=True)
class Flash(Params):
    """A FlashAttention move: BLOCK_M-query tiles walking BLOCK_N-key tiles, `precision` the fp32 products'
    input_precision, `fold_q`: the scale applied to the fp32 query tile once instead of to every score; `causal`:
    the op the move is made for is causal (its text says the tiles past the diagonal are skipped)."""

    BLOCK_M: int = 128
    BLOCK_N: int = 64
    num_warps: int = 8
    num_stages: int = 3
    precision: str = "ieee"
    fold_q: bool = False
    causal: bool = False
    # wide heads' exact products (precision "ieee", fp32 inputs) on a Hopper GPU's fp64 tensor cores (unfused.py):
    # faster than fp32 FMA products there (evidence.py)
    wide_fp64: bool = True

    def idea(self) -> str:
        causal = ", key tiles past the causal diagonal skipped" if self.causal else ""
        if self.precision not in _PRECISION:
            raise ValueError(f"unknown attention precision {self.precision!r}")
        text = (f"FlashAttention forward: a program per (batch·head, {self.BLOCK_M}-query tile) walks the keys in "
                f"{self.BLOCK_N}-wide tiles with an online softmax (running max and sum in fp32, exp2), so the L x S "
                f"scores never reach memory{causal}; {_PRECISION[self.precision]}; {self.num_warps} warps, "
                f"{self.num_stages} stages")
        fp64 = "; " + unfused.FP64_IDEA if self.wide_fp64 and self.precision == "ieee" else ""
        return text + self._variant() + _WIDE + fp64

    def _variant(self) -> str:
        if self.fold_q:
            return "; " + _FOLD
        if self.num_stages > 3:
            return " (a deeper pipeline of narrow key tiles to hide load latency)"
        if self.BLOCK_N > 64:
            return " (wider key tiles: half the loop steps)"
        if self.BLOCK_M < 128:
            return " (twice the programs of 128-query tiles: for few heads or short sequences)"
        return ""

    def category(self) -> str:
        if self.precision == "tf32":
            return "precision"
        if self.precision == "tf32x3" or self.fold_q:
            return "compute"
        if self.num_stages > 3:
            return "async"
        if self.BLOCK_N > 64:
            return "control"
        return "parallelism" if self.BLOCK_M < 128 else "memory"

    @property
    def relaxed(self) -> bool:
        return self.precision == "tf32"


def moves(op: Op) -> list[Flash]:
    causal = bool(op.detail.get("causal"))
    return [Flash(128, 64, 8, 3, "ieee", causal=causal), Flash(64, 64, 4, 3, "ieee", causal=causal),
            Flash(128, 64, 8, 3, "tf32x3", causal=causal), Flash(128, 128, 8, 2, "ieee", causal=causal),
            Flash(128, 64, 4, 3, "ieee", fold_q=True, causal=causal), Flash(64, 32, 4, 4, "ieee", causal=causal),
            Flash(128, 64, 8, 3, "tf32", causal=causal)]


def render(op: Op, p: Flash, names: Names) -> Rendered:
    return kernels.flash(op, p, names)


FAMILY = Family("attention", "triton", ("attention",), Flash, moves, render,
                inputs={"attention": ("q", "k", "v")},  # the forward body reads the first three inputs as q, k, v
                recognize=RECOGNIZER, cut={"attention": ("scaled_dot_product_attention",)},
                details=DETAILS)
