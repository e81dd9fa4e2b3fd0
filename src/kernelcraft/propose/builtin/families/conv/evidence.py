"""What the convolution family's rules rest on (propose/builtin/evidence.py): KernelBench's convs at their published
sizes, each move or tile probed, or run as the first kernel, against the one before it and torch.compile."""

from __future__ import annotations

from kernelcraft.propose.builtin.evidence import Evidence

H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"

EVIDENCE = (
    Evidence("moves", "the shifted-rows GEMM first, the packed 3xTF32 move its fallback",
             "probed, it ran 1.6-2.8x faster than the packed 3xTF32 move on seven stride-1 convs of more than one tap "
             "and 1.45x slower on a 1x1 one, which it leaves to the packed GEMM",
             H100, ("shifted-conv-probe-fused-h100-2026-11-27.json",), "e57c137"),
    Evidence("moves", "the shifted-rows GEMM first",
             "as the first move it took level 1's 55, 56, 62, 63 and 80 from 11.7-19.3 ms to 4.5-12.7 and 67 (1-D) "
             "5.2 -> 3.8, and 20 of level 2's 21 stride-1 conv chains 1.05-2.2x faster, 8 of those past "
             "torch.compile; with 8 in-channels (level 2's 57-92) the taps of a row packed into K",
             H100, ("kernelbench-level1-shifted-h100-2026-11-27.json",
                    "kernelbench-level2-shifted-h100-2026-11-27.json"), "b637548"),
    Evidence("shifted.lines", "the channel tile narrowed to the out-channels rounded up to a power of two (16 at "
             "least)",
             "on level2/21 (32 out-channels) the 64-wide tile took 6.67 ms against the packed implicit GEMM's 5.28 on "
             "32-wide ones; 21 kept its time once the channel tile was narrowed to its 32 out-channels",
             H100, ("kernelbench-level2-shifted-h100-2026-11-27.json",
                    "kernelbench-level2-narrow-h100-2026-11-27.json"), "7c74a15"),
    Evidence("shifted.TILES", "(128, 64, 4, 4) if COPG <= 64 else (128, 128, 8, 3 if CF > 16 else 4)",
             "a probe of the shifted-rows GEMM at KernelBench's published sizes chose 64 out-channels wide on 4 warps "
             "for 64 or fewer, else 128 on 8; K steps of 16 channels for 16 or fewer in-channels, else 32",
             H100, ("shifted-conv-probe-fused-h100-2026-11-27.json",), "e57c137"),
    Evidence("shifted.applies", "over three axes, more than PACK_C in-channels",
             "over three axes the packed K lost to the conv3d family's offsets loop on all four KernelBench convs it "
             "met (level 1's 54, 59, 60, 66: 3 in-channels; 3.31 ms against 2.30, 4.49 against 3.11, 12.48 and 5.93 "
             "against times below torch.compile's 9.91 and 4.88)",
             H100, ("kernelbench-level1-shifted-h100-2026-11-27.json",), "b637548"),
    Evidence("shifted.applies", "over three axes, more than PACK_C in-channels",
             "over three axes K = channels lost worse than the packed K to the offsets loop (7.30 ms on level 1's 54)",
             H200, ("kernelbench-level1-shifted-h200-2026-11-27.json",), "1f830b4"),
    Evidence("moves", "the first move compiles its kernels per input shape (compiled_sizes)",
             "against the same move without it level 1's 63 took 12.77 -> 10.97 ms, 55 6.77 -> 6.69 and 50 (stride 4, "
             "the packed GEMM) 3.47 -> 3.37",
             H100, ("params-probe-compiled-h100-2026-11-27.json",), "647535f"),
    Evidence("shifted.kernel", "compiled=True: the sizes constexprs, one build per input shape",
             "compiled for sm_90a as launches specialize it, the kernel shrinks from 1,872 to 1,072 instructions at "
             "level1/55's sizes, 3,816 to 1,056 at 70's (225 registers to 90), 2,576 to 1,992 at level2/57's (its 64 "
             "bytes of spill gone); the K loop is the same, the epilogue's index work is what goes",
             "none: static SASS counts for sm_90a (Triton 3.9), compiled on the CPU",
             ("sass-shifted-compiled-2026-11-27.log",), "55e433b"),
    Evidence("shifted.FOLD_WASTE", "1.5",
             "folded, level 1's 50 (AlexNet's 11 x 11 at stride 4: 3 x 3 taps over 48 channels) took 3.25 ms with the "
             "direct kernel, 1.72 folded, torch.compile 2.96",
             H100, ("kernelbench-level1-fold-h100-2026-11-28.json",), "7bc77f8"),
    Evidence("implicit_gemm.gemm_moves", "K steps of 16 on the first moves",
             "benchmarks/conv_sweep.py on AlexNet's first layer: K steps of 16 win",
             H100, ("conv-sweep-h100-2026-11-22.json",)),
    Evidence("implicit_gemm.gemm_moves", "the 3xTF32 taps move second, after the packed first move",
             "the 3xTF32 taps move beat the packed first move on 5 of 7 conv/conv3d level-2 problems and lost on 2",
             H100, ("moves-conv-level2-h100-2026-11-25.json",)),
    Evidence("direct.kernel", "a kernel of its own, not a K loop in the implicit GEMM's kernel",
             "the same loop put into the implicit GEMM's kernel (flat positions over all images, int64 addresses, the "
             "tile transposed for its epilogue and store) ran 50 at 110.8 ms and 54 at 2.70 ms: Triton then laid the "
             "loop's tile out for the transposed store",
             H100, ("kernelbench-level1-direct-gemm-h100-2026-11-27.json",), "e1e4f80"),
    Evidence("direct.kernel", "the groups beside the images on grid axis 1",
             "groups on axis 2 with the channel tiles doubled the registers, 254 against 126 on level1/54's conv: one "
             "program an SM where two fit, 2.39 ms against 1.94",
             H100, ("direct-conv-probe-family-h100-2026-11-27.json",), "26a6003"),
    Evidence("direct.DirectTiles", "weight_rows=True: the weight read as (in-channels x taps, out-channels) rows",
             "level 1's 54 went 1.94 -> 1.65 ms and 59 2.29 -> 2.03 on the family's tile (torch.compile 1.84 and 2.71)",
             H100, ("direct-conv-probe-rows-h100-2026-11-28.json",), "7f24d8a"),
    Evidence("direct.DirectTiles", "weight_rows=True: the weight read as (in-channels x taps, out-channels) rows",
             "level 2's Conv3d chains 6, 23, 24 and 83 0.459 -> 0.302 ms, 1.011 -> 0.824, 0.863 -> 0.681, 1.644 -> "
             "1.157",
             H200, ("kernelbench-level2-rows-h200-2026-11-28.json", "kernelbench-level2-latest-h200-2026-11-28.json"),
             "841ce29"),
    Evidence("direct.TILES_2D", "128 positions x 128 out-channels, 4 warps, the taps looped, K from 17 to 4 * 11 * 11",
             "weight as it lies, interleaved with torch.compile (exact fp32 baselines): level 1's 50 (3 -> 96 "
             "channels, 11 x 11 taps at stride 4) on 128 positions x 128 out-channels, 4 warps, the taps looped: 2.53 "
             "and 3.02 ms in two passes on two machines, torch.compile 2.96 and 2.95, the packed 3xTF32 move 3.45 (in "
             "the family, kernelbench.py's row: 3.25 ms, 0.91x torch.compile). With the taps of a row unrolled 50 ran "
             "fastest (2.41 ms on 256 x 128 tiles), but such builds lose their registers on other shapes; tiles of 8 "
             "warps, taps looped, ran 3-9x slower on 50",
             H100, ("direct-conv-probe-h100-2026-11-27.json", "kernelbench-level1-direct2d-h100-2026-11-27.json"),
             "a9a90eb"),
    Evidence("direct.TILES_3D", "512 positions x 16 out-channels, 4 warps, the taps looped, K up to 81",
             "weight as it lies: level 1's 54 and 59 (3-D, 3 -> 64 channels, 3 x 3 x 3 taps) 1.92 and 2.29 on 512 "
             "positions x 16 out-channels, 4 warps, the taps looped, against 2.15 and 2.69 for the offsets move "
             "(torch.compile 1.83 and 2.83). 3-D convs of 105 taps (60, 66) lost to the offsets move on every tile "
             "probed",
             H100, ("direct-conv-probe-h100-2026-11-27.json",)),
)
