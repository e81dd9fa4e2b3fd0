"""What the rows family's rules rest on (propose/builtin/evidence.py): KernelBench's reductions at their published
sizes, each tiling or loop as a first kernel against the one before it."""

from __future__ import annotations

from kernelcraft.propose.builtin.evidence import Evidence

H100 = "NVIDIA H100 80GB HBM3"

EVIDENCE = (
    Evidence("LONG", "(8192, 8): the first move's tiles for a long reduced dim",
             "at level 1's 47-49 and 53, (128, 4096, 4095) over dim 1, 8192-element tiles of 8 warps took 3.35-3.38 "
             "ms against 3.55-3.58 for 4096 on 4 (torch.compile 3.52-3.62)",
             H100, ("params-probe-h100-2026-11-27b.json", "kernelbench-level1-firstmoves-h100-2026-11-27.json"),
             "2de438d"),
    Evidence("LONG", "taken only where the reduced dim has BLOCK_R or more elements; shorter ones keep TILE, num_warps",
             "reductions over level 2's 16-64 channels did not gain from the long tiles (24: 1.23 -> 1.31 ms, 79 and "
             "92 2% slower); between 64 and 4096 untimed",
             H100, ("kernelbench-level2-firstmoves-h100-2026-11-27.json",), "2de438d"),
    Evidence("reduce_moves", "the tiled loop first; the lean loop offered after it",
             "the lean loop first at KernelBench level 1's 47-49 and 53: 4.98 ms against 3.58-3.67 for the tiled loop "
             "(the record's reverted_rows)",
             H100, ("kernelbench-level1-session2-h100-2026-11-26.json",), "5593397"),
)
