"""Arg-reduction family (argmax, argmin; the indices of torch.max/min over a dim) over a contiguous x seen as
[outer, R, inner] (columns.py): a program takes BLOCK_C columns (over a leading or middle dim, adjacent ones of one
outer index: columns.py's PLAN and PLACE, contiguous vector loads) and walks R in BLOCK_R tiles, keeping a running
(value, first index, seen NaN) per column. torch's rules: ties give the first index, and a NaN counts as the
extreme (the first NaN's index wins). With few columns R is split over programs and the partial (value, index)
pairs are combined in split order by a second launch of the same kernel. The lean first pass (ArgTiles.lean, the
first moves) keeps only (value, index) per slot, the NaN carried in the value (kernels.py); the tiled kernel still
combines its split partials."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.families.argreduce import kernels
from kernelcraft.propose.builtin.families.argreduce.ops import DETAILS
from kernelcraft.propose.builtin.families.argreduce.recognize import RECOGNIZER
from kernelcraft.propose.builtin.family import Family, Names, Params, Rendered
from kernelcraft.propose.builtin.plan import Op


@dataclass(frozen=True)
class ArgTiles(Params):
    ROW_MAX: int = 16384  # reduced extents up to this many values (times the columns a tile takes) in one tile
    BLOCK_R: int = 1024  # else the reduced dim is walked in tiles of this many values
    TILE: int = 4096  # elements per program's tile (short rows packed)
    num_warps: int = 4
    split_target: int = 2048  # few column tiles: the reduced dim split so that about this many programs run (0: never)
    lean: bool = False  # the lean first pass (kernels.py): NaN carried in the value, no flags, pointer walked by tiles

    def idea(self) -> str:
        if self.lean:
            whole = f"whole reduced extent in one tile up to {self.ROW_MAX} values, else " if self.ROW_MAX else ""
            split = f"split aim {self.split_target}" if self.split_target else "no split (one program per column tile)"
            return (f"Lean arg-reduction loop: NaN carried in the running value and each slot started at its own "
                    f"first row, so per element one load, two compares, a select and a max (no NaN or seen flags, no "
                    f"64-bit offsets recomputed, rows masked only in a ragged last tile); {whole}{self.BLOCK_R}-value "
                    f"tiles of the reduced dim, {self.TILE}-element tiles on {self.num_warps} warps (scaled with a "
                    f"tile that outgrows {self.TILE} elements, up to 16), {split}")
        if self.ROW_MAX:
            return (f"Whole reduced extent in one tile when it fits (up to {self.ROW_MAX} values; short rows packed "
                    f"{self.TILE} per program): extreme and first index found in registers from one read; "
                    f"{self.num_warps} warps")
        if not self.split_target:
            return (f"One program per column tile walks the whole reduced dim in {self.BLOCK_R}-element tiles: no "
                    "partial buffers, a single launch")
        return (f"Reduced dim walked in {self.BLOCK_R}-element tiles with a running (value, first index) carry per "
                f"column; few columns split the reduced dim over programs (aim: {self.split_target}), partial pairs "
                f"combined in order; {self.num_warps} warps")

    def category(self) -> str:
        if self.lean:
            return "compute" if self.split_target else "control"
        return "memory" if self.ROW_MAX else "parallelism" if self.split_target else "control"


def moves(op: Op) -> list[ArgTiles]:
    """The lean kernel first, on large tiles (the fastest probed: evidence.py); then the tiled kernel's first move, to
    compare, and the lean kernel on the tiled moves' other tilings and on 16 warps (16 x 256 on 8 warps, the slowest,
    is no longer a move)."""
    return [ArgTiles(lean=True, TILE=16384, num_warps=8), ArgTiles(lean=True, TILE=8192, num_warps=8),
            ArgTiles(lean=True), ArgTiles(lean=True, TILE=2048), ArgTiles(),
            ArgTiles(ROW_MAX=0, BLOCK_R=4096, TILE=8192, num_warps=8, split_target=8192, lean=True),
            ArgTiles(ROW_MAX=0, split_target=0, lean=True), ArgTiles(lean=True, num_warps=16)]


def render(op: Op, p: ArgTiles, names: Names) -> Rendered:
    return kernels.argreduce(op, p, names)


FAMILY = Family("argreduce", "triton", ("argreduce",), ArgTiles, moves, render, recognize=RECOGNIZER,
                cut={"reduce": ("argmax", "argmin")},
                details=DETAILS)
