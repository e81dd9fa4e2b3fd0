"""What the transposed 3-D conv's rules rest on (propose/builtin/evidence.py): KernelBench's transposed 3-D convs at
their published sizes, a sweep of tiles and precisions, and each first move against the one before it."""

from __future__ import annotations

from kernelcraft.propose.builtin.evidence import Evidence

H100 = "NVIDIA H100 80GB HBM3"

EVIDENCE = (
    Evidence("moves", "3xTF32 first",
             "3xTF32 ran 1.5x the exact moves at KernelBench level-2 sizes",
             H100, ("producer-sweep-level2-h100-2026-11-25.json",)),
    Evidence("moves", "128x64 tiles of 4 warps and 4 stages second, at 3xTF32",
             "the fastest of ten tile variants on two level-2 problems",
             H100, ("producer-sweep-level2-h100-2026-11-25.json",)),
    Evidence("moves", "as_conv first where the op has stride 1 and no output padding",
             "the conv it equals by shifted rows, against the first move's phases: level 1's 58 9.60 -> 3.82 ms, 61 "
             "24.2 -> 7.9, 68 102.6 -> 19.2, 70 49.2 -> 19.6 and level 2's 13 26.4 -> 7.9, 61 11.8 -> 3.3, 77 37.0 "
             "-> 10.3",
             H100, ("kernelbench-level1-shifted-h100-2026-11-27.json",
                    "kernelbench-level2-shifted-h100-2026-11-27.json",
                    "kernelbench-level1-narrow-h100-2026-11-27.json"), "b637548"),
    Evidence("moves", "no move sets compiled_sizes",
             "level 1's 58 and 70 took the same time with it, within 0.3%",
             H100, ("params-probe-compiled-h100-2026-11-27.json",), "647535f"),
)
