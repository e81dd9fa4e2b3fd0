"""Norm family (layernorm, rmsnorm) over rows of N: rows in registers (one read, one write) when N fits; longer
rows are split over programs: per-chunk statistics (Welford or two-pass), merged per row by the writer
(benchmarks/probes/moves_probe.py times each move and kernel). An rmsnorm over a dim that is not the last normalizes
columns (R elements inner apart), 16 or more side by side so that loads coalesce, in registers where R fits.
Pointwise steps after the norm are its epilogue, applied to the fp32 result before each store.

Its ops are read by analyze.py's core (recognize=None): layer_norm and the rmsnorm spellings (x * rsqrt(mean(x^2)
+ eps) * w) are built from the interpreter's pending abstract values (a mean of squares, its products)."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.families.norm import kernels
from kernelcraft.propose.builtin.families.norm.ops import DETAILS
from kernelcraft.propose.builtin.family import Family, Names, Params, Rendered
from kernelcraft.propose.builtin.plan import Op


@dataclass(frozen=True)
class Rows(Params):
    """Rows of up to ROW_MAX elements in registers, TILE elements per program (short rows packed); longer rows
    split into BLOCK_N-element tiles in chunks over programs (aiming at split_target of them; 0: one program per row), their
    statistics one-pass Welford (`welford`) or two-pass, a group of rows at a time sized to L2 (`l2_groups`)."""

    ROW_MAX: int = 16384
    TILE: int = 4096
    BLOCK_N: int = 2048
    num_warps: int = 8
    split_target: int = 2048
    welford: bool = True
    l2_groups: bool = False

    def idea(self) -> str:
        if not self.welford:
            return ("Two-pass statistics per chunk of a long row: the sum for the mean, then the squared deviations "
                    "(exact, the chunk re-read from L2) instead of one-pass Welford")
        if self.l2_groups:
            return ("Long rows normalized a group at a time (as many rows as fit in a third of L2): the statistics "
                    "pass leaves the group in L2, so the writing pass re-reads it from there, not from DRAM")
        if not self.split_target:
            return (f"Long rows handled by one program each, looping over {self.BLOCK_N}-element tiles (no split, "
                    "no partials)")
        if (self.split_target, self.BLOCK_N) != (2048, 2048):
            return (f"Long rows split finer (aim: {self.split_target} programs, {self.BLOCK_N}-element tiles) so few "
                    "rows still fill the GPU; per-chunk statistics merged per row by the writing pass")
        return (f"Rows up to {self.ROW_MAX} elements held in registers: statistics and normalization from one read, "
                f"one write (short rows packed {self.TILE} elements per program, {self.num_warps} warps)")

    def category(self) -> str:
        if not self.welford:
            return "precision"
        if self.l2_groups:
            return "memory"
        if not self.split_target:
            return "control"
        return "parallelism" if (self.split_target, self.BLOCK_N) != (2048, 2048) else "memory"


def moves(op: Op) -> list[Rows]:
    out = [Rows(), Rows(num_warps=4), Rows(ROW_MAX=8192, TILE=8192), Rows(split_target=4096, BLOCK_N=1024),
           Rows(split_target=0), Rows(split_target=4096, BLOCK_N=1024, l2_groups=True)]
    if op.kind == "layernorm":
        out.append(Rows(welford=False))
    return out


def render(op: Op, p: Rows, names: Names) -> Rendered:
    return kernels.render(op, p, names)


FAMILY = Family("norm", "triton", ("layernorm", "rmsnorm"), Rows, moves, render, epilogue=("layernorm", "rmsnorm"),
                cut={"norm": ("layer_norm", "native_layer_norm", "rms_norm")},
                details=DETAILS)
