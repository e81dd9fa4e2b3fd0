"""What the channel norms' rules rest on (propose/builtin/evidence.py): batch and group norms at the bundled suite's
and KernelBench's published sizes, each tiling or resident path as a first kernel against the one before it."""

from __future__ import annotations

from kernelcraft.propose.builtin.evidence import Evidence

H100 = "NVIDIA H100 80GB HBM3"
PARTS_PROBES = ("params-probe-residentparts-l1-h100-2026-11-27.json",
                "params-probe-residentparts-l2-h100-2026-11-27.json")

EVIDENCE = (
    Evidence("_batchnorm_moves", "flat 1024-element tiles on 4 warps first",
             "the best of the four tilings on the bundled batchnorm2d: 0.96 of the roofline",
             H100, ("builtin-h100-2026-11-22.json",)),
    Evidence("_batchnorm_moves", "flat 1024-element tiles on 4 warps first",
             "as the pointwise tiling, 1024 on 4 warps matched torch.compile at KernelBench's 6.4 GB where 4096 on 8 "
             "warps was 2% slower",
             H100, ("pointwise-probe-h100-2026-11-27.json",), "47fcf5a"),
    Evidence("_group_moves", "the resident slabs first, with 32-bit offsets and the sizes compiled in",
             "the first version, with 64-bit offsets and run-time sizes (each element's channel a 64-bit division), "
             "lost at every size (level 1's 35, 64 parts a slab, 7.85 -> 13.75 ms; level 2's 23, 4 parts, 1.46 -> "
             "5.06). With 32-bit offsets and the sizes compiled in it gained at 8 parts or fewer (level 1's 34 7.68 "
             "-> 5.26; level 2's 21 5.13 -> 4.76, 23 1.46 -> 1.37, 27 6.77 -> 6.65, 83 2.42 -> 2.35, 85 1.98 -> 1.81, "
             "92 2.48 -> 2.37)",
             H100, ("kernelbench-level1-resident-h100-2026-11-27.json",
                    "kernelbench-level2-resident-h100-2026-11-27.json",
                    "kernelbench-level1-resident8-h100-2026-11-27.json",
                    "kernelbench-level2-resident8-h100-2026-11-27.json"), "eb6689b"),
    Evidence("kernels.RESIDENT_MAX_PARTS", "132 (and no more than the GPU's SMs)",
             "with the limit lifted to the SMs the resident path gained at 16 to 64 parts a slab too: level 1's 35 "
             "7.84 -> 6.15 ms; level 2's 60 3.88 -> 3.33, 19 13.83 -> 13.50, 61 3.28 -> 3.25",
             H100, PARTS_PROBES, "7f8cf1b4a9cb844b3adffc080def4a07dc7472c3"),
    Evidence("kernels.RESIDENT_WAITS", "the atomic polls (GroupRows.resident_wait's default); volatile loads offered",
             "the atomic polls were not what slowed the first version's 64-part slabs: on 35 they took 6.15 ms where "
             "the loads took 6.44; level 2's 19, 60 and 61 tied",
             H100, PARTS_PROBES, "7f8cf1b4a9cb844b3adffc080def4a07dc7472c3"),
)
