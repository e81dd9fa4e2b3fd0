"""Pointwise family: elementwise chains (plan.py's `elementwise` op) as flat 1-D tiles with a masked tail, the op's
steps chained in fp32 registers; the grid is one program per tile, or capped at a few programs per SM that loop
(persistent). Chains with tensor operands (x + self.bias, x * y) take the broadcast kernel under the same moves."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.families.pointwise import kernels
from kernelcraft.propose.builtin.families.pointwise.ops import DETAILS
from kernelcraft.propose.builtin.family import Family, Names, Params, Rendered
from kernelcraft.propose.builtin.plan import Op, operand_refs


@dataclass(frozen=True)
class Tiles(Params):
    BLOCK: int = 1024  # elements per tile
    num_warps: int = 4
    per_sm: int | None = None  # persistent grid: this many programs per SM loop over the tiles
    evict_first: bool = False  # loads and stores with evict_first: the data is touched once
    # the broadcast kernel's sizes and strides compiled in as constants (a build per shape); no effect without operands.
    # No move sets it: where probed it gained too little to reach torch.compile (evidence.py)
    compiled_sizes: bool = False
    # the broadcast kernel's sizes and strides but the last dim's read from one small tensor the host keeps per
    # layout, so a launch passes 9 arguments (two tensors) where it passed 30: Triton's launch costs the host per
    # argument. Its strides are hinted multiples of 16 where they are (kernels.kc_bcast_packed), or its loads are no
    # longer vectorized. The first move sets it (evidence.py). No effect without operands.
    packed_layout: bool = False

    def __post_init__(self):
        if self.compiled_sizes and self.packed_layout:
            raise ValueError("compiled_sizes and packed_layout exclude each other: the sizes are constants or loaded")

    def idea(self) -> str:
        compiled = ("; where operands broadcast, their sizes and strides compiled in as constants (one build per "
                    "shape: each element's coordinates decoded by constant divisions, shifts for powers of two)"
                    ) if self.compiled_sizes else ("; where operands broadcast, their sizes and strides (but the last "
                                                   "dim's) packed in a small tensor the host keeps per layout, so a "
                                                   "launch passes a few arguments") if self.packed_layout else ""
        if self.per_sm:
            return (f"Persistent grid: {self.per_sm} programs per SM loop over {self.BLOCK}-element tiles "
                    f"({self.num_warps} warps), so launch and tail costs are paid once{compiled}")
        if self.evict_first:
            return (f"Streaming cache hints: {self.BLOCK}-element tiles ({self.num_warps} warps) loaded and stored "
                    f"with evict_first, the data is touched once{compiled}")
        return (f"Flat 1-D grid, one program per {self.BLOCK}-element tile ({self.num_warps} warps), masked tail, "
                f"steps fused in fp32 registers{compiled}")

    def category(self) -> str:
        return "control" if self.per_sm else "memory" if self.evict_first else "parallelism"


def moves(op: Op) -> list[Tiles]:
    # 1024-element tiles of 4 warps first: at KernelBench's sizes they match torch.compile's kernel, where larger tiles
    # were slower (evidence.py); a broadcast's layout packed
    return [Tiles(1024, 4, packed_layout=True), Tiles(4096, 8), Tiles(2048, 4), Tiles(8192, 8),
            Tiles(4096, 8, per_sm=8), Tiles(4096, 8, evict_first=True)]


def render(op: Op, p: Tiles, names: Names) -> Rendered:
    if operand_refs(op.detail["steps"]):  # tensor operands: the body reads x and o0, o1, ... (broadcast)
        return kernels.broadcast(op, p, names)
    return kernels.flat(op, p, names)


# what the cutter fuses as pointwise: a wider set than the engineer's steps (plan.py), so that a chain with an op
# the engineer does not write (sin, a comparison) still stays one region
FAMILY = Family("pointwise", "triton", ("elementwise",), Tiles, moves, render, cut={"pointwise": (
    "add", "sub", "mul", "div", "truediv", "floordiv", "pow", "neg", "rsub", "relu", "relu6", "gelu", "silu",
    "sigmoid", "tanh", "exp", "exp2", "expm1", "log", "log1p", "log2", "sqrt", "rsqrt", "abs", "clamp", "clamp_min",
    "clamp_max", "clip", "hardtanh", "leaky_relu", "elu", "selu", "celu", "softplus", "mish", "hardswish",
    "hardsigmoid", "where", "masked_fill", "erf", "sin", "cos", "minimum", "maximum", "eq", "ne", "lt", "gt", "le",
    "ge", "logical_and", "logical_or", "logical_not", "reciprocal", "square", "sign", "floor", "ceil", "round",
    "lerp", "addcmul", "addcdiv", "float", "half", "bfloat16", "to", "type_as", "_to_copy", "dropout", "remainder",
    "fmod", "bitwise_and", "bitwise_or", "heaviside", "true_divide", "divide", "multiply", "subtract", "softsign")},
                details=DETAILS)
