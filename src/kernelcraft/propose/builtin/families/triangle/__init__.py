"""Triangle family: torch.triu / torch.tril of a tensor on its own (plan.py's `triangle` op; after a matmul the
GEMM family applies the same triangle as a mask in its epilogue instead). The entries kept are those whose column
j and row i within the last two dims satisfy j - i >= diagonal (triu) or <= diagonal (tril), the diagonal read at
run time; the others are written as zeros and never loaded.

A family of its own rather than a pointwise step: steps are position-free (the epilogues of GEMMs, convs and norms
apply them to tiles that know nothing of a matrix's rows), while a triangle needs each element's row and column
within the last two dims, read from the sizes at run time."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.families.triangle import kernels
from kernelcraft.propose.builtin.families.triangle.ops import DETAILS
from kernelcraft.propose.builtin.families.triangle.recognize import RECOGNIZER
from kernelcraft.propose.builtin.family import Family, Names, Params, Rendered
from kernelcraft.propose.builtin.plan import Op


@dataclass(frozen=True)
class TriangleTiles(Params):
    BLOCK: int = 4096  # elements per program
    num_warps: int = 8
    BLOCK_H: int = 0  # 0: flat tiles of the contiguous tensor; else tiles of BLOCK_H rows of one matrix
    evict_first: bool = False  # loads and stores with evict_first: the data is touched once

    def idea(self) -> str:
        if self.BLOCK_H:
            return (f"2-D tiles of {self.BLOCK_H}x{self.BLOCK // self.BLOCK_H} entries of one matrix per program "
                    f"({self.num_warps} warps): rows and columns from the program id, no per-element division; "
                    "entries outside the triangle never loaded, stored as zeros")
        hint = ", loads and stores with evict_first (touched once)" if self.evict_first else ""
        return (f"Flat 1-D grid, one program per {self.BLOCK}-element tile ({self.num_warps} warps): each entry's "
                f"row and column from its index, entries outside the triangle never loaded, stored as zeros{hint}")

    def category(self) -> str:
        return "control" if self.BLOCK_H else "memory" if self.evict_first else "parallelism"


def moves(op: Op) -> list[TriangleTiles]:
    return [TriangleTiles(), TriangleTiles(1024, 4), TriangleTiles(8192, 8), TriangleTiles(4096, 8, BLOCK_H=16),
            TriangleTiles(evict_first=True)]


def render(op: Op, p: TriangleTiles, names: Names) -> Rendered:
    return kernels.triangle(op, p, names)


FAMILY = Family("triangle", "triton", ("triangle",), TriangleTiles, moves, render, recognize=RECOGNIZER,
                details=DETAILS)
