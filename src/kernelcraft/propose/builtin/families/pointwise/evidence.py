"""What the pointwise family's rules rest on (propose/builtin/evidence.py): KernelBench's elementwise and broadcast
problems at their published sizes, each tiling or launch layout against the one before it, and what a launch costs."""

from __future__ import annotations

from kernelcraft.propose.builtin.evidence import Evidence

H100 = "NVIDIA H100 80GB HBM3"

EVIDENCE = (
    Evidence("moves", "1024-element tiles of 4 warps first",
             "at KernelBench's sizes (6.4 GB read and written) 1024-element tiles of 4 warps matched torch.compile's "
             "kernel, and 4096 of 8 were 2% slower (benchmarks/probes/pointwise_probe.py)",
             H100, ("pointwise-probe-h100-2026-11-27.json",), "47fcf5a"),
    Evidence("moves", "no move sets compiled_sizes",
             "the broadcast kernel with its sizes compiled in took level 1's 12 (diag(A) @ B, a row broadcast) 0.0507 "
             "-> 0.0503 ms, short of torch.compile's 0.0497",
             H100, ("params-probe-bcast-h100-2026-11-27.json",), "5369147"),
    Evidence("moves", "the first move packs a broadcast's layout (packed_layout)",
             "Triton's launch costs the host about 0.7 us an argument; with 9 arguments where it passed 30, the host's "
             "time a call of level 1's 12 went from 55 to 37 us and of 5 from 76 to 49",
             H100, ("launch-cost-h100-2026-11-27.json", "params-probe-packed-l1-h100-2026-11-27.json",
                    "params-probe-packed-l2-h100-2026-11-27.json"), "2f03c77f4d7ae8871f40f58c6e104329ee685bee"),
    Evidence("kernels.kc_bcast_packed", "packed strides hinted multiples of 16 where they are",
             "unhinted, level 2's 15 lost 7% (1.218 -> 1.308 ms, its loads no longer vectorized); hinted, 15 1.2146 "
             "against 1.2136 unpacked, and the rows whose first kernels broadcast within 0.5%",
             H100, ("kernelbench-level2-packed-h100-2026-11-27.json", "params-probe-aligned-l1-h100-2026-11-27.json",
                    "params-probe-aligned-l2-h100-2026-11-27.json", "kernelbench-level1-aligned-h100-2026-11-27.json",
                    "kernelbench-level2-aligned-h100-2026-11-27.json"), "b03f9cb04bcc83ce819c150f21a5b2898f0cd1a3"),
)
