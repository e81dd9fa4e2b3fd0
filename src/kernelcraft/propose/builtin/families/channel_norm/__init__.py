"""Channel-norm family over (N, C, *spatial) inputs (inner = the spatial size).

batchnorm (eval): a per-channel affine map; flat tiles find each element's channel as (offset // inner) % C, or
a program takes one (n, c) plane and loads its channel's coefficients once.
groupnorm / instancenorm: a "row" is one (n, group) slab of (C / G) * inner contiguous elements (instance: G = C),
normalized like the layer norm's rows: in registers when it fits (one read, one write), else split over programs
whose chunk statistics (Welford or two-pass, chunk_stats.py) are merged per row by the writing pass; the affine is
per channel, channel = group * (C / G) + col // inner. All three take the pointwise steps after them ("steps") as an
epilogue on the fp32 result before its store, parameter operands too (x * self.scale of any shape that broadcasts to
the output: kernels.py).

Two families, since their parameters differ: `BatchnormTiles` (batchnorm) and `GroupRows` (groupnorm and
instancenorm)."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.families.channel_norm import kernels
from kernelcraft.propose.builtin.families.channel_norm.ops import DETAILS
from kernelcraft.propose.builtin.families.channel_norm.recognize import RECOGNIZER
from kernelcraft.propose.builtin.family import Family, Names, Params, Rendered
from kernelcraft.propose.builtin.plan import Op


@dataclass(frozen=True)
class BatchnormTiles(Params):
    BLOCK: int = 4096  # elements per tile
    num_warps: int = 8
    planes: bool = False  # a program per (n, c) plane (flat tiles when planes are shorter than a quarter tile)
    evict_first: bool = False  # flat tiles with x loaded and y stored evict_first

    def idea(self) -> str:
        if self.evict_first:
            return (f"Streaming cache hints: flat {self.BLOCK}-element tiles with x loaded and y stored evict_first, "
                    "touched once")
        if self.planes:
            return (f"One program per (n, c) plane and {self.BLOCK}-element tile stride ({self.num_warps} warps): the "
                    "channel's scale and shift loaded once as scalars, no per-element channel division (flat tiles "
                    "when planes are shorter than a quarter tile)")
        return (f"Flat grid, one program per {self.BLOCK}-element tile ({self.num_warps} warps): each element's "
                "channel from its offset, running mean/var, weight and bias gathered per element (cache-resident), "
                "fp32 math")

    def category(self) -> str:  # (planes of large tiles: the grid's shape is the idea; of small ones, more programs)
        return "memory" if self.evict_first else "control" if self.planes and self.BLOCK >= 4096 else "parallelism"


_SPLIT = 2048  # the programs a split of long slabs aims at by default


@dataclass(frozen=True)
class GroupRows(Params):
    ROW_MAX: int = 16384  # slabs up to this many elements held in registers
    TILE: int = 4096  # elements per program when short slabs are packed
    BLOCK_N: int = 2048  # tile of a long slab's chunk loop
    num_warps: int = 8
    split_target: int = _SPLIT  # long slabs split so that about this many programs run (0: one program per slab)
    welford: bool = True  # chunk statistics in one Welford pass (else two passes)
    # long slabs on co-resident programs on a GPU, each chunk held in registers: one read of x (kernels.py,
    # _GROUP_RESIDENT), where a slab's programs fit on the GPU at once; else the split
    resident: bool = False
    resident_parts: int = kernels.RESIDENT_MAX_PARTS  # the most programs a slab takes on the resident path
    resident_wait: str = "atomic"  # how a resident program waits for its slab's others (kernels.RESIDENT_WAITS)

    def __post_init__(self):
        if self.resident_wait not in kernels.RESIDENT_WAITS:
            raise ValueError(f"resident_wait {self.resident_wait!r} is not one of {sorted(kernels.RESIDENT_WAITS)}")
        if self.resident_parts < 1:
            raise ValueError(f"resident_parts must be 1 or more, not {self.resident_parts}")

    def idea(self) -> str:
        if self.resident:
            return (f"(n, group) slabs up to {self.ROW_MAX} elements held in registers (one read, one write); longer "
                    f"ones split into {kernels.RESIDENT_CHUNK}-element chunks over programs running at once on a GPU, "
                    "each chunk held in registers while the slab's chunk statistics are merged through a barrier "
                    "between them: one read of x and one write, the slab's sizes compiled in (where a slab takes at "
                    f"most {self.resident_parts} programs and no more than the GPU's SMs; else the chunk statistics "
                    "merged by a second pass that reads x again)"
                    + ("; waiting programs poll the slab's count with volatile loads, then acquire it once"
                       if self.resident_wait == "load" else ""))
        if not self.welford:
            return ("Two-pass statistics per chunk of a long slab: the sum for the mean, then the squared deviations "
                    "(exact, the chunk re-read from L2) instead of one-pass Welford")
        if not self.split_target:
            return (f"Long slabs handled by one program each, looping over {self.BLOCK_N}-element tiles (no split, no "
                    "partials)")
        if self.split_target > _SPLIT:
            return (f"Long slabs split finer (aim: {self.split_target} programs, {self.BLOCK_N}-element tiles) so few "
                    "slabs still fill the GPU; per-chunk statistics merged per slab by the writing pass")
        return (f"(n, group) slabs up to {self.ROW_MAX} elements held in registers: statistics and normalization from "
                f"one read, one write (short slabs packed {self.TILE} elements per program, {self.num_warps} warps); "
                "longer slabs split over programs with Welford chunk statistics merged by the writing pass")

    def category(self) -> str:
        if not self.welford:
            return "precision"
        return "control" if not self.split_target else "parallelism" if self.split_target > _SPLIT else "memory"


def _batchnorm_moves(op: Op) -> list[BatchnormTiles]:
    # flat 1024-element tiles on 4 warps first: the best of the four tilings on the bundled batchnorm2d, and the
    # pointwise tiling that matched torch.compile at KernelBench's sizes (evidence.py)
    return [BatchnormTiles(1024, 4), BatchnormTiles(), BatchnormTiles(planes=True), BatchnormTiles(1024, 4, True),
            BatchnormTiles(evict_first=True)]


def _group_moves(op: Op) -> list[GroupRows]:
    # the resident slabs first: one read of x where a slab's programs fit on the GPU at once (at most
    # kernels.RESIDENT_MAX_PARTS; the measurements are there), the split path of the second move elsewhere
    return [GroupRows(resident=True), GroupRows(), GroupRows(num_warps=4), GroupRows(split_target=4096, BLOCK_N=1024),
            GroupRows(split_target=0), GroupRows(welford=False)]


def _render_batchnorm(op: Op, p: BatchnormTiles, names: Names) -> Rendered:
    return kernels.batchnorm(op, p, names)


def _render_group(op: Op, p: GroupRows, names: Names) -> Rendered:
    return kernels.group(op, p, names)


FAMILIES = (
    Family("batchnorm", "triton", ("batchnorm",), BatchnormTiles, _batchnorm_moves, _render_batchnorm,
           epilogue=("batchnorm",), operand_epilogue=("batchnorm",), recognize=RECOGNIZER,
           cut={"norm": ("batch_norm", "native_batch_norm", "_native_batch_norm_legit_no_training")},
           details=DETAILS),
    Family("groupnorm", "triton", ("groupnorm", "instancenorm"), GroupRows, _group_moves, _render_group,
           epilogue=("groupnorm", "instancenorm"), operand_epilogue=("groupnorm", "instancenorm"),
           cut={"norm": ("group_norm", "instance_norm")},
           details=DETAILS),
)
