"""Pooling family (max, avg, adaptive avg; 2-D, and 1-D as H = 1) over a contiguous x seen as [planes, H, W]:
each output walks its window tap by tap, masked loads standing for the padding. A global pool (adaptive to 1 x 1;
at run time, a window that is the whole plane) is one row reduction per plane instead (kernels.plane_reduce: the
rows family's reduce kernel), its moves how many planes a program takes and how wide its steps are. Programs take a tile of
outputs, [BLOCK_P planes, BLOCK_H rows, BLOCK_W cols] (overlapping windows of neighbouring outputs meet in
L1/L2), or a flat run of BLOCK outputs that decode their (plane, row, col). Window sizes, strides and padding
are the op's own constants (taps unrolled); adaptive bins are computed per output from the run-time sizes.

The conv family launches this family's kernel after a conv whose pooling folded into it (its first move).
kernels.py holds the kernel and forward, recognize.py how nn.MaxPool*/AvgPool*/AdaptiveAvgPool* and their F.*
spellings are read (and a pooling folded into the conv it follows)."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.families.pool import kernels
from kernelcraft.propose.builtin.families.pool.ops import DETAILS
from kernelcraft.propose.builtin.families.pool.recognize import RECOGNIZER
from kernelcraft.propose.builtin.family import Family, Names, Params, Rendered
from kernelcraft.propose.builtin.plan import Op


@dataclass(frozen=True)
class PoolTiles(Params):
    """A "tile" of BLOCK_P planes x BLOCK_H x BLOCK_W outputs per program, a "flat" run of BLOCK outputs, or
    ("global", a pooling to 1 x 1 only) BLOCK_P whole planes per program, each reduced in BLOCK-element steps."""

    variant: str = "tile"  # "tile" | "flat" | "global"
    num_warps: int = 4
    BLOCK_P: int | None = 1  # tile: planes per program
    BLOCK_H: int | None = 8  # tile: output rows (at most the output's height, rounded up to a power of 2)
    BLOCK_W: int | None = 64  # tile: output cols (likewise; widened where the output has fewer rows than BLOCK_H, so
    # a program keeps BLOCK_H * BLOCK_W outputs: a 1-D pool's one row takes 512-wide tiles, not 64 with lanes idle)
    BLOCK: int | None = None  # flat: outputs per program
    evict_last: bool = False  # tile loads with evict_last: input rows shared with the next tile stay in L2
    compiled_sizes: bool = False  # the plane count and sizes compiled in as constants (a build per input shape, as
    # torch.compile's kernels are: divisions by them are multiplies and shifts), offsets int32 where they fit

    def __post_init__(self):
        need = {"flat": ("BLOCK",), "global": ("BLOCK_P", "BLOCK")}.get(self.variant, ("BLOCK_P", "BLOCK_H", "BLOCK_W"))
        if self.variant not in ("tile", "flat", "global") or any(getattr(self, k) is None for k in need):
            raise ValueError(f"a {self.variant!r} pooling variant needs {', '.join(need)}")
        if self.variant == "global" and self.compiled_sizes:
            raise ValueError("the global pooling variant is a row reduction; it has no compiled sizes")

    def idea(self) -> str:
        text = self._idea()
        if self.compiled_sizes:
            text += ("; the input's sizes compiled into the kernel as constants (one build per input shape: the "
                     "index divisions become multiplies and shifts) and 32-bit offsets where every offset fits")
        return text

    def _idea(self) -> str:
        if self.variant == "global":
            if self.BLOCK_P == 1:
                return (f"Global pool as one row reduction per (n, c) plane: a program per plane walks its H*W "
                        f"contiguous elements in {self.BLOCK}-element vector steps, fp32 lanes reduced once at the "
                        f"end (few large planes: split over programs, then combined); {self.num_warps} warps")
            return (f"Global pool, {self.BLOCK_P} planes per program, each reduced in {self.BLOCK}-element vector "
                    f"steps, so small planes still fill the lanes; {self.num_warps} warps")
        if self.variant == "flat":
            return (f"Flat grid over all outputs, {self.BLOCK} per program: each output decodes its (plane, row, "
                    f"col) once and walks its window; no lane wasted on tile edges; {self.num_warps} warps")
        if self.evict_last:
            return (f"Output tiles of {self.BLOCK_H} x {self.BLOCK_W} loading with evict_last, so the input rows "
                    "shared with the next tile's windows stay in L2")
        if self.BLOCK_P > 1:
            return (f"Several planes per program: {self.BLOCK_P} planes x {self.BLOCK_H} x {self.BLOCK_W} outputs, "
                    "so small output planes (7x7, 14x14) do not leave most lanes of a one-plane tile idle")
        return (f"Output tiles of {self.BLOCK_H} x {self.BLOCK_W} in one (n, c) plane per program (as wide as "
                f"{self.BLOCK_H * self.BLOCK_W} where the output has one row: a 1-D pool); the window taps are "
                "unrolled, each one strided tile load, so the input rows that overlapping windows share are served "
                f"from L1/L2; {self.num_warps} warps")

    def category(self) -> str:
        if self.variant == "global":
            return "memory" if self.BLOCK_P == 1 else "parallelism"
        return "parallelism" if self.variant == "flat" or self.BLOCK_P > 1 else "memory"


def _flat(block: int, warps: int) -> PoolTiles:
    return PoolTiles("flat", warps, BLOCK_P=None, BLOCK_H=None, BLOCK_W=None, BLOCK=block)


def _global(planes: int, block: int, warps: int) -> PoolTiles:
    return PoolTiles("global", warps, BLOCK_P=planes, BLOCK_H=None, BLOCK_W=None, BLOCK=block)


def moves(op: Op) -> list[PoolTiles]:
    if kernels.is_global(op):  # one row reduction per plane: wide steps for large planes, packed planes for small
        return [_global(1, 1024, 4), _global(1, 4096, 8), _global(4, 256, 4), _global(16, 64, 4)]
    tile, tall = PoolTiles("tile", 4, 1, 8, 64), PoolTiles("tile", 4, 1, 16, 32)
    planes, evict = PoolTiles("tile", 4, 16, 8, 8), PoolTiles("tile", 4, 1, 8, 64, evict_last=True)
    if op.detail["pool"] == "adaptive_avg":  # few outputs per plane (e.g. 7x7): the plane-packing moves first
        return [planes, _flat(1024, 4), _flat(256, 2), tile, tall]
    # 512 outputs on 8 warps (two per thread) first for an average: it made the average pools faster and the max
    # pools slower (evidence.py)
    wide, long = PoolTiles("tile", 8, 1, 8, 64), PoolTiles("tile", 4, 1, 8, 128)
    out = ([wide, tile, tall, _flat(1024, 4), planes, evict, long] if op.detail["pool"] == "avg" else
           [tile, tall, _flat(1024, 4), planes, evict, wide, long])
    # The flat run with the sizes compiled in (1024 outputs on 8 warps), first where every stride is 1: overlapping
    # windows, whose taps a flat run's neighbours share in L1, want it; windows that do not overlap lost (evidence.py).
    # (It took the place of a flat run of 256 on 2 warps with run-time sizes, the slowest kind of kernel probed.)
    compiled = _flat(1024, 8).but(compiled_sizes=True)
    return [compiled, *out] if all(s == 1 for s in op.detail["stride"]) else [*out[:2], compiled, *out[2:]]


def render(op: Op, p: PoolTiles, names: Names) -> Rendered:
    return kernels.render(op, p, names)


FAMILY = Family("pool", "triton", ("pool2d",), PoolTiles, moves, render, recognize=RECOGNIZER,
                cut={"pool": ("max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d",
                              "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d",
                              "max_pool2d_with_indices", "_adaptive_avg_pool2d")},
                details=DETAILS)
