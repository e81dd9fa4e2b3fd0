"""Probe of the CUDA LayerNorm family's resident-row kernel on LayerNorm (16, 64, 256, 256): its time with and
without the affine weight and bias (w and b are re-read by every row: 33.5 MB each time unless L2 keeps them),
per move, beside the copy floor, and the host time one forward takes to issue its launches. `--once MOVE` runs one forward only (for a profiler such as ncu).

    python benchmarks/probes/layernorm_resident_probe.py > benchmarks/results/layernorm-resident-probe-h100.log
"""

import argparse
import time

import torch
import triton.testing

from benchmarks.matmul_sweep import load
from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.plan import Op

REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm((64, 256, 256), elementwise_affine={affine})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)
'''


def model(affine: bool, params):
    op = Op("layernorm", {"ndim": 3, "eps": 1e-5, "weight": "ln.weight" if affine else None,
                          "bias": "ln.bias" if affine else None})
    return load(registry.render(op, REFERENCE.format(affine=affine), params)).ModelNew().cuda()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--once", type=int, default=None, help="run move MOVE (an index) once, affine, and stop")
    args = ap.parse_args()
    moves = registry.moves(Op("layernorm", {"ndim": 3}), "cuda_nvrtc")
    x = torch.randn(16, 64, 256, 256, device="cuda")
    if args.once is not None:
        m = model(True, moves[args.once].params)
        m(x)
        torch.cuda.synchronize()
        return
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    print(f"copy floor (x.clone): {triton.testing.do_bench(lambda: x.clone(), warmup=30, rep=300):.4f} ms")
    for i, move in enumerate(moves):
        for affine in (True, False):
            m = model(affine, move.params)
            with torch.no_grad():
                ms = triton.testing.do_bench(lambda: m(x), warmup=30, rep=300)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(20):  # host time to issue one forward (the GPU is left to queue them)
                    m(x)
                host_us = (time.perf_counter() - t0) / 20 * 1e6
                torch.cuda.synchronize()
            print(f"move {i} affine={affine!s:5} {ms:.4f} ms  host {host_us:.0f} us/forward  {move.params}", flush=True)


if __name__ == "__main__":
    main()
