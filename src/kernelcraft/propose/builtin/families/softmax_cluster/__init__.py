"""Softmax / log-softmax in CUDA (NVRTC): each row read once, split over a thread-block cluster.

A row of n floats is cut into one slice per CTA of a cluster (sm_90+); each thread keeps its part of the
slice in registers (float4 loads when the row allows), the CTA reduces its max, the CTAs exchange their
maxima through distributed shared memory (mapa + ld.shared::cluster, barrier.cluster), then the same for
the sum of exponentials, and each thread writes its part: one read and one write of the row, which is what
a memory-bound softmax can at best do. Rows too long for the cluster's registers take a block-per-row
kernel (three passes), a reduced dim that is not the last takes a thread-per-column kernel: slower, but
right on every shape. fp32 in and out. Moves choose the cluster size, the threads per CTA, and whether
loads and stores carry evict-first (streaming) cache hints.

The staged moves (first: the fastest on the H100, 91.7% of a plain copy on softmax 4096 x 65536, see
benchmarks/results) copy each CTA's slice into shared memory with cp.async instead of registers: no register
waits on DRAM, so up to seven small CTAs share an SM and many more rows are in flight. Rows whose slice
would not fit in shared memory take the register kernels.

Its ops are read by analyze.py's core (recognize=None), as the Triton softmax family's are.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.families.rows.ops import DETAILS
from kernelcraft.propose.builtin.families.softmax_cluster import kernels
from kernelcraft.propose.builtin.family import NVRTC_HEAD, Family, Names, Params, Rendered
from kernelcraft.propose.builtin.plan import Op


@dataclass(frozen=True)
class Cluster(Params):
    """A row over a cluster of up to `cluster` CTAs of `threads` threads each; `stream`: loads and stores
    evict-first; `staged`: each CTA's slice (up to that many KB) staged in shared memory by cp.async, 0: held in
    registers."""

    cluster: int = 8
    threads: int = 512
    stream: bool = False
    staged: int = 0

    def idea(self) -> str:
        if self.staged:
            return (f"Single read staged in shared memory: each row over a cluster of up to {self.cluster} CTAs "
                    f"({self.threads} threads each), each CTA's slice (up to {self.staged} KB) copied in by cp.async, "
                    "so no registers wait on DRAM and up to seven CTAs share an SM; max and sum exchanged through "
                    "distributed shared memory, one write" + (", stored evict-first (st.global.cs)" if self.stream else ""))
        if self.stream:
            return (f"Single read over an {self.cluster}-CTA cluster ({self.threads} threads each) with streaming "
                    "cache hints: the row is loaded and stored evict-first (ld.global.cs / st.global.cs), it is "
                    "touched once")
        return (f"Single read: each row split over a {self.cluster}-CTA thread-block cluster ({self.threads} threads "
                "each), held in registers as float4, the row max and sum exchanged through distributed shared memory, "
                "one write")

    def category(self) -> str:
        if self.staged or self.stream:
            return "memory"
        return "memory" if self.threads == 512 else "parallelism"  # other CTA sizes: another spread of the row


def moves(op: Op) -> list[Cluster]:
    if op.detail.get("steps"):
        return []  # a pointwise epilogue: the Triton softmax family fuses it
    staged = [Cluster(8, t, st, kb) for kb, t, st in ((64, 512, False), (64, 512, True), (32, 256, False),
                                                      (64, 256, False))]
    registers = [Cluster(c, t) for c, t in ((8, 512), (4, 512), (8, 256), (2, 1024))]
    return staged + registers + [Cluster(c, t, stream=True) for c, t in ((8, 512), (8, 256))]


def render(op: Op, p: Cluster, names: Names) -> Rendered:
    return kernels.render(op, p, names)


FAMILY = Family("softmax_cluster", "cuda_nvrtc", ("softmax", "log_softmax"), Cluster, moves, render, head=NVRTC_HEAD,
                details=DETAILS)
