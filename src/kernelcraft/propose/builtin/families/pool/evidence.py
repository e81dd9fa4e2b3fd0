"""What the pool family's rules rest on (propose/builtin/evidence.py): KernelBench's pools at their published sizes,
each tiling or combine against the first move before it."""

from __future__ import annotations

from kernelcraft.propose.builtin.evidence import Evidence

H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"

EVIDENCE = (
    Evidence("moves", "512 outputs on 8 warps (wide) the first tile move of an average pool, not of a max pool",
             "512 outputs on 8 warps made AvgPool1d's 44 1.33x and AvgPool2d's 45 1.12x faster, and MaxPool1d's 41 and "
             "MaxPool2d's 42 2% slower; 1024 outputs on 4 warps made 41 4% and 44 3% faster, 42 6% slower",
             H100, ("params-probe-h100-2026-11-27.json",), "7d8851f"),
    Evidence("moves", "the flat run with the sizes compiled in (1024 outputs on 8 warps) first where every stride is 1",
             "against their first moves it made 41 (MaxPool1d) 1.68x, 42 (MaxPool2d) 1.51x and 44 (AvgPool1d) 1.36x "
             "faster, and 45 (AvgPool2d, 11 x 11 windows at stride 11) 1.83x slower; a flat run of 256 on 2 warps "
             "with run-time sizes was the slowest kind of kernel in the probe",
             H200, ("params-probe-pool-h200-2026-11-27.json",), "5aedb2a"),
    Evidence("kernels._body", "a max pool combines by two compares and a select, not max.NaN",
             "max.NaN (tl.maximum, NaN propagated) made MaxPool2d's 42 2% slower (4.55 -> 4.64 ms) and MaxPool1d's 41 "
             "no faster; pool3d's 43 5% faster with it",
             H100, ("pool-combine-ab-h100-2026-11-27.json", "kernelbench-level1-poolbn-h100-2026-11-27.json")),
)
