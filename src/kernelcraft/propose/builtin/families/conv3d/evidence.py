"""What the 3-D convolution's rules rest on (propose/builtin/evidence.py): KernelBench's conv3d problems at their
published sizes, each rule as a first kernel, or each move, against the one before it."""

from __future__ import annotations

from kernelcraft.propose.builtin.evidence import Evidence

H100 = "NVIDIA H100 80GB HBM3"

EVIDENCE = (
    Evidence("kernels.TAPS_FIRST", "32",
             "level2/43 (32 in-channels, padded: the offsets loop needs bounds masks) took 5.6 ms so against the "
             "offsets first move's 9.0, while level2/47 (32, unpadded: no masks) took 14.1 against 8.8",
             H100, ("kernelbench-level2-taps-h100-2026-11-26.json",)),
    Evidence("kernels._CONV3D", "the tile stored as the dot leaves it, [BLOCK_M, BLOCK_N]",
             "transposed first (so that a warp would write consecutive voxels of one out-channel), the layout change "
             "through shared memory made every move 1.4-3.4x slower on level1/54 and 59 (3 in-channels, a K loop of "
             "a few steps) and the first move 1.17-1.24x slower on level 2's Conv3d chains; of 50 strict moves timed "
             "there only the second (at 3 in-channels: the packed loop, 32-wide K steps) was faster transposed, by "
             "1.1-1.16x",
             H100, ("moves-conv3d-store-h100-2026-11-26.json",)),
    Evidence("Conv3dTiles", "wide_m on the first moves: 256x64 tiles where the out-channels narrow the channel tile "
             "to 64",
             "the first move's wide_m took every such conv3d in KernelBench 1.11-1.37x faster: level 1's 54, 59, 60 "
             "and 66 (3 in-channels) and level 2's 43, 47 and 90. 256-voxel tiles on 16-, 24- and 32-wide channel "
             "tiles were 2-22% slower (level 2's 6, 7, 8, 23, 24, 27, 48, 79, 83), so those keep 128",
             H100, ("kernelbench-level1-conv3d256-h100-2026-11-27.json",
                    "kernelbench-level2-conv3d256-h100-2026-11-27.json")),
    Evidence("moves", "the shifted rows first, the offsets first move their fallback",
             "they took level 2's 43 5.05 -> 3.57 ms and 47 7.03 -> 3.70 (0.72 -> 1.37x torch.compile)",
             H100, ("kernelbench-level2-shifted-h100-2026-11-27.json",), "6281a39"),
    Evidence("moves", "the first move sets compiled_sizes; the second is the first without it",
             "against the same move without it level 1's 54 2.29 -> 2.11 ms, 59 3.09 -> 2.66, 60 5.04 -> 4.86, "
             "66 2.55 -> 2.46",
             H100, ("params-probe-compiled-h100-2026-11-27.json",), "647535f"),
    Evidence("kernels.SIZES", "constexprs under a move's compiled_sizes",
             "for sm_90a at level 1's 54's and 59's sizes the offsets kernel's 3,024 instructions become 1,240 and "
             "952, most of them the epilogue's index work",
             "none: static SASS counts for sm_90a (Triton 3.9), compiled on the CPU",
             ("sass-shifted-compiled-2026-11-27.log",), "55e433b"),
)
