"""LayerNorm in CUDA (NVRTC): each row read once, held in the registers of as many thread blocks as it needs.

A row of N floats is cut into one slice per block of a *group* of B blocks; each thread keeps its part of
the slice in registers (float4 when the row allows), computes its exact two-pass mean and sum of squared
deviations, and the block merges them (Chan et al.). With B > 1 the group's blocks then exchange their
statistics through global memory (exchange.py: each block publishes (count, mean, M2) behind a release flag
and gathers the group's B entries once their flags show this row). Every
block merges the same entries in the same order, so all of them normalize with the same mean and rstd, and
write their slice: one DRAM read and one write of x, which is what a memory-bound LayerNorm can at best do.

Long rows take the whole GPU (a 4.2M-element row over 132 blocks of 1024 threads, 31 floats each); short rows
take one block each, and as many groups as fit run side by side, each looping over its rows. Rows that do not
fit in the GPU's registers take a block-per-row kernel that reads the row three times: slow, but right on
every shape. Groups of B > 1 need all their blocks resident at once: the launch is cooperative (it fails
rather than deadlock), and the group size comes from the kernel's measured occupancy.

Moves choose the threads per block, cache hints (x and y streamed evict-first, w and b kept evict-last in L2,
since every row reads them again), and an L2 prefetch of a block's next slice while it waits for the
group's statistics. fp32 in and out; a pointwise epilogue after the norm is left to the Triton family (no moves).

Its ops are read by analyze.py's core (recognize=None), as the Triton norm family's are.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.families.layernorm_exchange import kernels
from kernelcraft.propose.builtin.families.norm.ops import DETAILS
from kernelcraft.propose.builtin.family import NVRTC_HEAD, Family, Names, Params, Rendered
from kernelcraft.propose.builtin.plan import Op

_FRACTIONS = {0.5: "half", 0.75: "three quarters", 1.0: "all"}


@dataclass(frozen=True)
class Exchange(Params):
    """Blocks of `threads` threads; `stream`: x and y evict-first, w and b evict-last; `prefetch`: the fraction of
    a block's slice of the next row prefetched into L2 while the group exchanges statistics (0: none);
    `affine_smem`: each block keeps its slices of w and b in shared memory, as far as it goes."""

    threads: int = 1024
    stream: bool = True
    prefetch: float = 0.0
    affine_smem: bool = True

    def idea(self) -> str:
        extra = (", x and y streamed evict-first while w and b are kept in L2 (evict-last): every row re-reads them"
                 if self.stream else " (no cache hints)")
        if self.affine_smem:
            extra += (", and each block keeps its slice of w (and of b, as far as shared memory goes) for all its "
                      "rows, so a row re-reads only the rest of b")
        if self.prefetch:
            fraction = _FRACTIONS.get(self.prefetch, f"{self.prefetch:.0%}")
            extra += (f", and each block prefetches {fraction} of its slice of the next row, and the part of b not "
                      "in shared memory, into L2 (cp.async.bulk.prefetch) while the group exchanges its statistics")
        return (f"Single read: each row held in the registers of as many {self.threads}-thread blocks as it needs "
                "(the whole GPU for a long row); block statistics exchanged through a flag-synchronized all-gather "
                f"in global memory, one write{extra}")

    def category(self) -> str:
        return "memory" if self.threads == 1024 else "parallelism"  # smaller blocks: more of them per row


def moves(op: Op) -> list[Exchange]:
    if op.detail.get("steps"):
        return []  # a pointwise epilogue: the Triton norm family fuses it
    return [Exchange(prefetch=0.5), Exchange(prefetch=0.75), Exchange(prefetch=1.0), Exchange(),
            Exchange(prefetch=0.5, affine_smem=False), Exchange(512, prefetch=0.5),
            Exchange(stream=False, affine_smem=False)]


def render(op: Op, p: Exchange, names: Names) -> Rendered:
    return kernels.render(op, p, names)


FAMILY = Family("layernorm_exchange", "cuda_nvrtc", ("layernorm",), Exchange, moves, render, head=NVRTC_HEAD,
                details=DETAILS)
