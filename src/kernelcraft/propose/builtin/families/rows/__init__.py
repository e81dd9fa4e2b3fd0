"""Rows families: softmax and log_softmax, and reductions (sum, mean, max, min, logsumexp, 2-norm) over a dim or
over adjacent dims taken as one, on a contiguous x seen as [outer, R, inner] (columns.py): a program takes a tile
of BLOCK_C "columns" (outer * inner of them, R elements each, `inner` apart) and BLOCK_R of R at a time. inner == 1
is the plain row case (several short rows per program); inner > 1 takes columns that sit side by side so loads
coalesce (softmax: one outer index and up to COLUMNS adjacent columns per program, softmax.py). Softmax keeps all
of R in one tile when it fits (falls back to an online running max and sum at run time when not) and applies the
pointwise steps after it, parameter operands too, as an epilogue; reduce splits R over programs when there are few
columns and combines the fp32 partials with a second launch, and over a leading or middle dim takes adjacent columns
of one outer index per program (columns.py's PLAN and PLACE: contiguous, vectorized loads). A reduction may carry a
prologue, the pointwise steps before it (tensor operands too: mean((a - b) ** 2)), applied to each tile as it is
loaded (prologue.py), so the elementwise result is never written. The reduce kernels also serve the pooling
families' global pools. A reduction without a prologue has a lean loop too (Reduce.lean, the second and third moves: a uniform
tile start over loop-invariant offsets, rows masked only in a ragged last tile; kernels.py's _LEAN).

Two families, one per parameter set: `softmax` (kinds softmax, log_softmax) and `reduce`. Their ops are read by
analyze.py's core (recognize=None): softmax and the reductions interact with the interpreter's pending abstract
values (a mean of squares that becomes an rmsnorm, a max subtracted before an exp)."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.families.rows import kernels, prologue, softmax
from kernelcraft.propose.builtin.families.rows.ops import DETAILS
from kernelcraft.propose.builtin.family import Family, Names, Params, Rendered
from kernelcraft.propose.builtin.plan import Op

VARIANTS = ("row", "online")


@dataclass(frozen=True)
class Softmax(Params):
    """"row": the reduced extent held whole in registers where it fits (up to ROW_MAX elements per program), else
    the online path; "online": always a running max and rescaled sum over BLOCK_R-element tiles, then a writing
    pass. TILE: elements per program (short rows are packed that many per program). COLUMNS: along a dim that is
    not the last, at least this many adjacent columns per tile (where the inner dims have them), loaded contiguously."""

    variant: str = "row"
    ROW_MAX: int | None = 16384  # "row" only
    BLOCK_R: int = 4096
    TILE: int = 4096
    num_warps: int = 4
    COLUMNS: int = 64

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"softmax variant {self.variant!r} is none of {VARIANTS}")

    def idea(self) -> str:
        if self.variant == "online":
            return (f"Online softmax statistics in {self.BLOCK_R}-element tiles: one pass keeps a running max and "
                    f"rescaled sum, a second pass writes; {self.num_warps} warps")
        if self.COLUMNS != 64:
            return (f"Wide column tiles for a softmax over a leading or middle dim: at least {self.COLUMNS} adjacent "
                    f"columns ({4 * self.COLUMNS} contiguous bytes of fp32) per row of R, all of R held in registers "
                    f"where it fits ({self.ROW_MAX} elements); {self.num_warps} warps")
        return (f"Whole row in one program: load the reduced extent once (up to {self.ROW_MAX} elements, short rows "
                f"packed {self.TILE} elements per program), max/exp/sum in registers, one write; {self.num_warps} warps")

    def category(self) -> str:
        if self.variant == "online":
            return "control"
        return "parallelism" if self.TILE < 4096 else "memory"  # smaller tiles: more programs


def softmax_moves(op: Op) -> list[Softmax]:
    return [Softmax("row", 16384, TILE=4096, num_warps=4), Softmax("row", 16384, TILE=4096, num_warps=8),
            Softmax("row", 16384, TILE=2048, num_warps=4), Softmax("online", None, 4096, 4096, 8),
            Softmax("row", 8192, TILE=8192, num_warps=8), Softmax("online", None, 1024, 2048, 4),
            Softmax("row", 16384, TILE=8192, num_warps=8, COLUMNS=128)]


@dataclass(frozen=True)
class Reduce(Params):
    """Tiles of TILE elements, BLOCK_R of them along R, accumulated in fp32; with fewer column tiles than
    split_target, R is split over programs (aiming at split_target of them) and the partials combined by a second
    launch; split_target 0: one program per column tile walks all of R. COLUMNS: at most this many adjacent
    columns of one outer index per tile (a reduction over a dim that is not the last: the grid is (outer index,
    column block), so the loads are contiguous and vectorize), more where R is short; a last-dim reduction packs
    TILE // BLOCK_R rows per program instead. `long`: (tile, warps) that a reduced dim of BLOCK_R or more elements
    takes instead of (TILE, num_warps), chosen when forward runs (None: the same tiles for every R)."""

    BLOCK_R: int = 1024
    TILE: int = 4096
    num_warps: int = 4
    split_target: int = 2048
    COLUMNS: int = 256
    lean: bool = False  # the lean loop (kernels.py's _LEAN; a reduction with a prologue keeps the tiled one)
    long: tuple[int, int] | None = None

    def idea(self) -> str:
        if self.long and not self.lean:
            return self._idea() + (f"; a reduced dim of {self.BLOCK_R} or more elements takes {self.long[0]}-element "
                                   f"tiles on {self.long[1]} warps instead (more of it in flight per program)")
        return self._idea()

    def _idea(self) -> str:
        if self.lean:
            split = f"split aim {self.split_target}" if self.split_target else "no split (one program per column tile)"
            return (f"Lean reduction loop: each tile addressed from one uniform start plus loop-invariant offsets "
                    f"(no 64-bit offsets recomputed per element), rows masked only in a ragged last tile; tiles of "
                    f"{self.TILE} elements, {self.BLOCK_R} of the reduced dim by up to {self.COLUMNS} adjacent "
                    f"columns, on {self.num_warps} warps; {split}")
        if not self.split_target:
            return "One program per column tile walks the whole reduced dim: no partial buffer, a single launch"
        rows = max(1, self.TILE // self.COLUMNS)
        if self.COLUMNS != Reduce.COLUMNS:
            return (f"{'Wide' if self.COLUMNS > Reduce.COLUMNS else 'Narrow'} column tiles for a reduction over a "
                    f"leading or middle dim: up to {self.COLUMNS} adjacent columns ({4 * self.COLUMNS} contiguous "
                    f"bytes of fp32 per row) by {rows} rows per step, {self.num_warps} warps")
        if self.BLOCK_R >= 4096:
            return (f"Long reduced tiles ({self.BLOCK_R} of R by few columns) to keep many loads in flight per "
                    "program")
        return (f"Tiles of {self.TILE} elements over the reduced dim accumulated in fp32 registers, reduced once at "
                f"the end (over a leading or middle dim: {self.COLUMNS} adjacent columns of one outer index by {rows} "
                "rows, vector loads); with few output columns the reduced dim is split over programs (aim: "
                f"{self.split_target}) and the partials combined by a second launch; {self.num_warps} warps")

    def category(self) -> str:
        if not self.split_target:
            return "control"
        if self.lean:
            return "compute"
        return "memory" if self.BLOCK_R >= 4096 or self.COLUMNS > Reduce.COLUMNS else "parallelism"


# A long reduced dim takes 8192-element tiles of 8 warps in the first move, faster there than 4096 on 4; reductions
# over 16-64 channels did not gain from them, so they keep TILE and num_warps; between 64 and 4096 untimed
# (evidence.py).
LONG = (8192, 8)
TILED = [Reduce(), Reduce(256, 2048, 4, 8192), Reduce(4096, 8192, 8), Reduce(1024, 8192, 8), Reduce(split_target=0),
         Reduce(1024, 8192, 8, COLUMNS=128), Reduce(1024, 4096, 4, COLUMNS=64), Reduce(1024, 4096, 4, COLUMNS=512)]


def reduce_moves(op: Op) -> list[Reduce]:
    """The tiled loop first, its reduced dims of BLOCK_R or more on LONG tiles; then the lean loop (its 8-warp and
    TILE 2048 tilings), which lost to the tiled loop (evidence.py), so it is offered, not preferred; then the tiled
    loop's other tilings. A reduction with a prologue has the tiled loop only (prologue.py's kernel), its tilings in
    TILED's order."""
    if op.detail.get("pre"):
        return list(TILED)
    return [TILED[0].but(long=LONG), Reduce(lean=True, num_warps=8), Reduce(lean=True, TILE=2048), *TILED[1:6]]


def render_softmax(op: Op, p: Softmax, names: Names) -> Rendered:
    return softmax.render(op, p, names)


def render_reduce(op: Op, p: Reduce, names: Names) -> Rendered:
    if op.detail.get("pre"):  # pointwise steps before the reduction, applied as each tile is loaded (prologue.py)
        return prologue.render(op, p, names)
    return kernels.reduce(op, p, names)


FAMILIES = (Family("softmax", "triton", ("softmax", "log_softmax"), Softmax, softmax_moves, render_softmax,
                   epilogue=("softmax", "log_softmax"), operand_epilogue=("softmax", "log_softmax"),
                   cut={"softmax": ("softmax", "log_softmax", "_softmax", "_log_softmax")},
                   details=DETAILS),
            # var, std and prod it does not write; still each a reduction the cutter makes a region of
            Family("reduce", "triton", ("reduce",), Reduce, reduce_moves, render_reduce,
                   cut={"reduce": ("sum", "mean", "amax", "amin", "max", "min", "logsumexp", "norm",
                                   "linalg_vector_norm", "var", "std", "prod")},
                   details=DETAILS))
