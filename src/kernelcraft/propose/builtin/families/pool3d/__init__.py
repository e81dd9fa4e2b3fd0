"""3-D pooling family (plan.py's `pool3d`: max, avg, adaptive avg and adaptive max over the last three dims of
(N, C, D, H, W) or (C, D, H, W), fp32 or 16-bit, accumulated in fp32).

Windowed pooling walks each output's window tap by tap (kernels.windowed): programs take tiles of outputs, one or
several (plane, depth) slices of rows x columns, or flat runs of outputs; the moves are those tilings and their
warps. An adaptive pooling to (1, 1, 1), a global pool, is one reduction per (n, c) plane instead
(kernels.global_pool), its moves how many planes a program reduces and how wide its steps are. Every move is right
on any shape; the forward hands the op a contiguous input, so the kernels read NCDHW as it lies (a channels-last
tiling would first need a transpose that costs as much as the pooling)."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.families.pool3d import kernels
from kernelcraft.propose.builtin.families.pool3d.ops import DETAILS
from kernelcraft.propose.builtin.families.pool3d.recognize import RECOGNIZER
from kernelcraft.propose.builtin.family import Family, Params
from kernelcraft.propose.builtin.plan import Op


@dataclass(frozen=True)
class Tiling(Params):
    variant: str = "tile"  # "tile": [BLOCK_Q, BLOCK_H, BLOCK_W] outputs per program; "flat": BLOCK outputs;
    #                        "global": BLOCK_Q whole planes per program (a pooling to (1, 1, 1) only)
    BLOCK_Q: int = 1  # tile: (plane, depth) slices per program; global: planes per program
    BLOCK_H: int = 8  # tile: output rows
    BLOCK_W: int = 64  # tile: output columns
    BLOCK: int = 1024  # flat: outputs per program; global: elements per step of each plane's reduction
    num_warps: int = 4
    evict_last: bool = False  # tile and flat: loads with evict_last (the next tile's windows read them again)

    def idea(self) -> str:
        nw, hint = self.num_warps, ("loading with evict_last, so the input rows shared with the next tile's "
                                    "windows stay in L2; " if self.evict_last else "")
        if self.variant == "global":
            if self.BLOCK_Q == 1:
                return (f"Global pool as one reduction per (n, c): a program per plane walks its whole D*H*W volume "
                        f"in {self.BLOCK}-element contiguous steps, fp32 lanes reduced once at the end; {nw} warps")
            return (f"Global pool, {self.BLOCK_Q} planes per program, each reduced in {self.BLOCK}-element steps, so "
                    f"small volumes still fill the lanes; {nw} warps")
        if self.variant == "flat":
            return (f"Flat grid over all outputs, {self.BLOCK} per program: each output decodes its (plane, depth, "
                    f"row, col) once and walks its window; no lane wasted on tile edges; {hint}{nw} warps")
        if self.BLOCK_Q == 1 and self.evict_last:
            return (f"Output tiles of {self.BLOCK_H} x {self.BLOCK_W} in one (n, c, depth) slice per program, "
                    f"{hint}{nw} warps")
        if self.BLOCK_Q == 1:
            return (f"Output tiles of {self.BLOCK_H} x {self.BLOCK_W} in one (n, c, depth) slice per program; each "
                    f"window tap is one strided tile load, so the input rows that overlapping windows share are "
                    f"served from L1/L2; {nw} warps")
        return (f"Several depth slices per program: {self.BLOCK_Q} (n, c, depth) slices x {self.BLOCK_H} x "
                f"{self.BLOCK_W} outputs, so small output planes do not leave most lanes idle and the windows of "
                f"neighbouring depths meet in L1; {hint}{nw} warps")

    def category(self) -> str:
        if self.variant == "global":
            return "memory" if self.BLOCK_Q == 1 else "parallelism"
        if self.evict_last or (self.variant == "tile" and self.BLOCK_Q == 1):
            return "memory"
        return "parallelism"


def _tile(q: int, h: int, w: int, warps: int = 4, **kw) -> Tiling:
    return Tiling("tile", BLOCK_Q=q, BLOCK_H=h, BLOCK_W=w, num_warps=warps, **kw)


def _flat(block: int, warps: int) -> Tiling:
    return Tiling("flat", BLOCK=block, num_warps=warps)


def _global(q: int, block: int, warps: int) -> Tiling:
    return Tiling("global", BLOCK_Q=q, BLOCK=block, num_warps=warps)


def moves(op: Op) -> list[Tiling]:
    if kernels.is_global(op):  # one reduction per plane: wide steps for large volumes, packed planes for small
        return [_global(1, 1024, 4), _global(1, 4096, 8), _global(4, 256, 4), _global(16, 64, 4)]
    found = [_tile(1, 8, 64), _tile(4, 4, 32), _flat(1024, 4), _tile(16, 8, 8), _tile(1, 8, 64, evict_last=True),
             _flat(256, 2)]
    if op.detail["pool"].startswith("adaptive"):  # few outputs per plane (e.g. 4x4x4): the packing moves first
        return [found[3], found[2], found[5], found[0], found[1]]
    return found


FAMILY = Family("pool3d", "triton", ("pool3d",), Tiling, moves, kernels.render, recognize=RECOGNIZER,
                cut={"pool": ("max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "max_pool3d_with_indices")},
                details=DETAILS)
