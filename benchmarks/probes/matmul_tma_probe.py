"""Probe of the GEMM family's TMA move on level1/matmul (4096², fp32): a few tiles and stage counts of the first
TMA move, each checked against an fp64 product and timed with triton.testing.do_bench (CUDA events). Prints one
line per config (an out-of-shared-memory config prints its error).

    python benchmarks/probes/matmul_tma_probe.py > benchmarks/results/matmul-tma-probe-h100.log
"""

import traceback

import torch
import triton
import triton.testing

from benchmarks.matmul_sweep import load
from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.registry import moves, render
p = load_problem("level1/matmul"); op = analyze(p).single
a, b = (t.cuda() for t in p.load().get_inputs())  # noqa: E501
ref = a.double() @ b.double()
print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
for m in moves(op):
    if not m.params.tma or m.params.precision != "tf32":
        continue
    for bm, bn, bk, st in ((128, 256, 32, 3), (128, 128, 32, 4), (128, 256, 64, 3), (128, 128, 64, 3), (256, 128, 32, 3)):
        params = m.params.but(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=st)
        try:
            model = load(render(op, p.source, params)).ModelNew().cuda()
            out = model(a, b)
            err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
            ms = triton.testing.do_bench(lambda: model(a, b), warmup=30, rep=200)
            print(bm, bn, bk, st, "ms", round(ms, 4), "TFLOP/s", round(2 * 4096**3 / ms / 1e9, 1), "err", err, flush=True)
        except Exception:
            print(bm, bn, bk, st, traceback.format_exc()[-1500:], flush=True)
    break
