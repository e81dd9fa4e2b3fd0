"""What the arg-reductions' rules rest on (propose/builtin/evidence.py): KernelBench's argmax and argmin at their
published sizes, the lean kernel's tilings probed against each other."""

from __future__ import annotations

from kernelcraft.propose.builtin.evidence import Evidence

EVIDENCE = (
    Evidence("moves", "the lean kernel first on large tiles (TILE 16384, then 8192); 16 x 256 on 8 warps no longer a "
             "move",
             "at (128, 4096, 4095) over dim 1, 64 x 256 tiles (16 warps) took 3.01 ms, 32 x 256 3.08, 16 x 256 with 4 "
             "warps 3.12 and with 8 warps 4.92 (torch.compile 3.29)",
             "NVIDIA H100 80GB HBM3", ("params-probe-h100-2026-11-27.json",), "7d8851f"),
)
