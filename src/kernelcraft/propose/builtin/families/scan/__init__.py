"""Scan family: cumsum and cumprod along any dim, inclusive forward or reverse (flip(scan(flip(x)))) or exclusive
(each entry the scan of the entries before it: the tiles read x one row back), over a
contiguous x seen as [outer, R, inner] (columns.py): a program takes BLOCK_C columns and walks R in BLOCK_R tiles;
each tile is scanned in fp32 registers (tl.cumsum / tl.cumprod) and offset by the running carry of the tiles
before it, so rows of any length take one read and one write. With few columns R is split in chunks over
programs: a first launch writes each chunk's total, a second scans each chunk starting from the combined totals of
the chunks before it."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.families.scan import kernels
from kernelcraft.propose.builtin.families.scan.ops import DETAILS
from kernelcraft.propose.builtin.families.scan.recognize import RECOGNIZER
from kernelcraft.propose.builtin.family import Family, Names, Params, Rendered
from kernelcraft.propose.builtin.plan import Op


@dataclass(frozen=True)
class ScanTiles(Params):
    BLOCK_R: int = 2048  # scanned elements per tile
    TILE: int = 4096  # elements per program's tile (columns packed)
    num_warps: int = 4
    split_target: int = 0  # few column tiles: the scanned dim split so that about this many programs run (0: never)

    def idea(self) -> str:
        if self.split_target:
            return (f"Few long rows: the scanned dim split in chunks over programs (aim: {self.split_target}); a first "
                    "launch writes each chunk's total, a second re-reads its chunk and starts from the totals before "
                    f"it; {self.BLOCK_R}-element tiles")
        return (f"Column tiles walk the scanned dim in {self.BLOCK_R}-element tiles: each tile scanned in fp32 "
                "registers and offset by the running carry of the tiles before it: one read, one write; "
                f"{self.num_warps} warps")

    def category(self) -> str:  # (tiles of 4096 and more: fewer, wider loads per carry step)
        return "parallelism" if self.split_target else "memory" if self.BLOCK_R >= 4096 else "control"


def moves(op: Op) -> list[ScanTiles]:
    return [ScanTiles(), ScanTiles(BLOCK_R=4096, TILE=8192, num_warps=8), ScanTiles(BLOCK_R=1024, split_target=2048),
            ScanTiles(split_target=8192), ScanTiles(BLOCK_R=512, TILE=1024, num_warps=2)]


def render(op: Op, p: ScanTiles, names: Names) -> Rendered:
    return kernels.scan(op, p, names)


FAMILY = Family("scan", "triton", ("scan",), ScanTiles, moves, render, recognize=RECOGNIZER,
                cut={"reduce": ("cumsum", "cumprod")},
                details=DETAILS)
