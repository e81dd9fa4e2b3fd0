"""What the GEMM family's rules rest on (propose/builtin/evidence.py): tile sweeps and probes of KernelBench's matmuls
and linear layers at their published sizes, each tiling or move against the one before it."""

from __future__ import annotations

from kernelcraft.propose.builtin.evidence import Evidence

H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"
SPLIT_PROBES = ("tf32-split-probe-h100-2026-11-26.json", "tf32-split-probe2-h100-2026-11-26.json")

EVIDENCE = (
    Evidence("tiles.HALF_TMA", "((128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (256, 128, 64, 8, 4)); HALF_PLAIN "
             "((128, 256, 64, 8, 3),)",
             "benchmarks/matmul_sweep.py --problem level1/matmul_fp16 (4096², eager cuBLAS 0.181 ms): TMA-fed "
             "persistent tiles reading B (K, N) as it lies 0.199 ms at 128x256x64 (8 warps, 3 stages), 0.201-0.230 "
             "ms for the other tiles; the same tiles with B transposed first 0.323-0.340 ms; the strided kernel 0.214 "
             "ms at 128x256x64, 0.283 ms at 128x128x64. The moves take the two best TMA tiles, the best 256x128 one "
             "and the best strided one",
             H100, ("matmul-fp16-sweep-h100-2026-11-22.json",)),
    Evidence("tiles.TMA_TILES", "((128, 256, 32, 8, 3), (256, 128, 32, 8, 3))",
             "TF32 fed by TMA, B transposed to K-major (benchmarks/matmul_tma_probe.py, 4096² fp32): 128x256x32 in 3 "
             "stages 279.1 TFLOP/s, 256x128x32 in 3 stages 256.7, 128x128x32 in 4 stages 246.6, 128x128x64 in 3 "
             "stages 236.5; 128x256x64 in 3 stages asked more shared memory than the GPU has",
             "NVIDIA H100", ("matmul-tma-probe-h100-2026-11-22.log",)),
    Evidence("tiles.EXACT_TILES", "(128, 128, 32, 8, 3): a 3xTF32 TMA move's strided kernel runs exact fp32 at them",
             "on KernelBench level 1's 3, 6, 8 and 16, 3xTF32 at the TMA tiles on the strided kernel was 1.2-1.5x "
             "slower than the exact first move's",
             H200, ("kernelbench-level1-losers-h200-2026-11-26.json",), "c92cba3"),
    Evidence("tiles.SPLIT_TILES", "(128, 128, 32, 8, 3)",
             "operands split once, 128x256 tiles hold three 128x256 accumulators and spill: 6-12x slower than 128x128 "
             "(benchmarks/probes/tf32_split_probe.py)",
             H100, SPLIT_PROBES),
    Evidence("tiles.SPLIT_ONCE_MIN", "512",
             "both at 128x128x32 tiles, the split pass included: split once 1.05-1.34x faster than 3xTF32 split in the "
             "K loop from M N / (M + N) = 512 (1024 x 1024, K = 65536: 1.34x) to 16384 (KernelBench level 1's 7_, K = "
             "64: 1.05x); smaller products keep the in-loop split, not measured against it",
             H100, SPLIT_PROBES),
    Evidence("tiles.SPLIT_CHUNK", "16",
             "left to the tensor cores' own running sum, a KernelBench-sized product at K = 65536 was off by 1.5e-4 of "
             "max |C|; folded into an fp32 accumulator every 16 steps, 1.4e-6",
             H100, ("tf32-split-probe2-h100-2026-11-26.json",)),
    Evidence("tiles.SHORT_K_TILES", "(64, 64, 32, 4, 3), exact fp32, where K is at most SHORT_K (32)",
             "level 1's 9 (32768 x 32 times 32 x 32768): 2.39 ms, against 2.73 for the 3xTF32 operands split once fed "
             "by TMA and 3.34 for exact fp32 at 128x128 (torch.compile 2.53)",
             H100, ("params-probe-h100-2026-11-27b.json",), "7b76ce7"),
    Evidence("tiles.LINEAR_TMA_TILES", "128x128 TMA tiles before TMA_TILES for a linear layer",
             "a batch of 128 rows (KernelBench level 2's linear layers) makes one row of tiles, and 256-wide ones "
             "leave half of the SMs idle: 1.2x slower there",
             H100, ("tiles-gemm-level2-h100-2026-11-25.json",
                    "chain-profile-level2-torch-defaults-h100-2026-11-25.json",
                    "chain-profile-level2-strict-h100-2026-11-25.json")),
    Evidence("moves", "the matmul's first move runs split-K's parts on the TMA kernel (split_k_tma)",
             "benchmarks/probes/params_probe.py --vary '{\"split_k_tma\": true}': level 1's 6 (256x256 by K "
             "524,288) 1.60 -> 1.26 ms; 3, 8 and 16, which do not split K, as they were",
             H100, ("params-probe-splitk-h100-2026-11-27.json",), "647535f"),
    Evidence("kernels.rows_copy", "the family's own copy (64 x 64 tiles) of operands TMA cannot read as they lie",
             "3_'s B.T, 128 x (2048, 1024), 1 GB, copied in 0.72 ms where torch's .contiguous() took 2.14 (beside a "
             "~3.5 ms batched GEMM), 97_'s v.T (2 GB) in 1.43 ms against 4.22, an 8192 x 8192 transpose in 0.19 ms "
             "against 0.55",
             H100, ("transpose-copy-probe-h100-2026-11-27.json",)),
)
