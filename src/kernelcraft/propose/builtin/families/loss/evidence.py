"""What the loss family's rules rest on (propose/builtin/evidence.py): KernelBench's reduced losses at their
published sizes, the persistent grid against a program per tile."""

from __future__ import annotations

from kernelcraft.propose.builtin.evidence import Evidence

H100 = "NVIDIA H100 80GB HBM3"

EVIDENCE = (
    Evidence("_loss_moves", "a reduced kl_div's first move is the persistent grid (4 programs per SM)",
             "at KernelBench level 1's 98 (over 2 x 1 GB) the persistent grid took 0.720 ms against 0.815 for a "
             "program per 4096-element tile, the next best tiling 0.817 (torch.compile 0.754)",
             H100, ("params-probe-h100-2026-11-27b.json",), "7b76ce7"),
    Evidence("_loss_moves", "the other losses keep a program per tile first",
             "the persistent grid made level 1's 96 (Huber) 1% slower (2.774 -> 2.808 ms)",
             H100, ("kernelbench-level1-firstmoves-h100-2026-11-27.json",), "2de438d"),
)
