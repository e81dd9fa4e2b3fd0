"""GEMM family (matmul, bmm, transposed operands; linear layers with a bias-and-pointwise epilogue): a program per
BLOCK_M x BLOCK_N output tile (GROUP_M swizzle) and batch, a masked K loop of tl.dot into an fp32 accumulator;
operands read through their strides (a transpose is a stride swap). input_precision "ieee" (exact fp32),
"tf32x3" (fp32-grade on the tensor cores) or "tf32" (fp32 inputs rounded: a relaxed move). TMA moves add a
persistent kernel whose operand tiles come through tensor descriptors (TMA on Hopper), used at run time on a Hopper
GPU (tma.py: a matmul's fp32 moves take any operands, copying those TMA cannot read as they lie; 16-bit moves and
linears 2-D operands with aligned rows), the strided kernel otherwise (under a 3xTF32 TMA move, exact fp32 at the
first exact move's tiles: Tiles.strided). Under the GEMV move, products with at most
GEMV_COLUMNS columns (matrix-vector) take a GEMV kernel. The pointwise steps after a matmul (scaling,
activations) are applied to the fp32 tile before its store, as a linear's bias and steps are (with parameter
operands of one value or one per column, read along the columns). A matmul of 16-bit inputs (op.detail["dtype"])
gets 16-bit moves instead (tiles.py)."""

from __future__ import annotations

from kernelcraft.propose.builtin.families.gemm import host
from kernelcraft.propose.builtin.families.gemm.ops import DETAILS
from kernelcraft.propose.builtin.families.gemm.recognize import RECOGNIZER
from kernelcraft.propose.builtin.families.gemm.tiles import Tiles, moves
from kernelcraft.propose.builtin.family import Family, Names, Rendered
from kernelcraft.propose.builtin.plan import Op


def render(op: Op, p: Tiles, names: Names) -> Rendered:
    return host.matmul(op, p, names) if op.kind == "matmul" else host.linear(op, p, names)


FAMILY = Family("gemm", "triton", ("matmul", "linear"), Tiles, moves, render,
                inputs={"matmul": ("a", "b")},  # the forward body reads the first two inputs as a, b
                epilogue=("linear", "matmul"), operand_epilogue=("linear",), recognize=RECOGNIZER,
                cut={"linear": ("linear", "addmm"), "matmul": ("matmul", "__matmul__", "mm", "bmm", "baddbmm", "einsum")},
                details=DETAILS)
