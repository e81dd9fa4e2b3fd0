"""What the attention family's rules rest on (propose/builtin/evidence.py): KernelBench's 97_ScaledDotProductAttention
(1024-wide heads) at its published size, verified and probed on each path for wide heads."""

from __future__ import annotations

from kernelcraft.propose.builtin.evidence import Evidence

H100 = "NVIDIA H100 80GB HBM3"
FP64_PROBES = ("params-probe-wide-fp64-h100-2026-11-28.json", "params-probe-wide-fp64-h100-2026-11-28a.json")

EVIDENCE = (
    Evidence("unfused.WIDE", "heads whose padded query row is over Q_ROW_BYTES or fp32 accumulator row over "
             "ACC_ROW_BYTES take the unfused kernels",
             "level 1's 97 on the fused kernel: a 1024-wide fp32 head spilled so badly that its verification ran past "
             "60 s (timeout)",
             H100, ("kernelbench-level1-rest-h100-2026-11-26.json",), "0209f64"),
    Evidence("unfused.body", "the exact move (\"ieee\") keeps exact products on a Hopper GPU, not 3xTF32 through TMA",
             "with 3xTF32 products in the exact move, a score's error multiplied by its size in the softmax took "
             "KernelBench's 97 to 5.6e-4 relative at the verifier's mixed-scale trial (scores in the hundreds), past "
             "the strict policy's 1e-4",
             H100, ("kernelbench-level1-cost-h100-2026-11-27.json", "kernelbench-level1-exact97-h100-2026-11-27.json"),
             "95b5127"),
    Evidence("Flash", "wide_fp64 on by default: wide heads' exact products on a Hopper GPU's fp64 tensor cores",
             "level 1's 97 (1024-wide heads) ran 40.1 ms with fp32 FMA products, 21.1 with these, torch.compile 24.1",
             H100, FP64_PROBES, "2194a93"),
    Evidence("unfused.FP64_TILES", "(64, 4)",
             "at level 1's 97, 64 rows on 4 warps 21.1 ms, the first move's 128 on 8 23.2",
             H100, FP64_PROBES, "2194a93"),
)
