"""Tile sweep for the built-in engineer's Triton GEMM: which (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages)
are worth offering as moves: exact fp32 and TF32 on level1/matmul (4096², fp32); with --problem
level1/matmul_fp16, 16-bit tiles through the TMA-fed persistent kernel (B read as it lies, or transposed
once to K-major) and through the strided kernel. Each config is rendered through the real family
(registry.render), checked against torch.matmul, and timed with triton.testing.do_bench (CUDA
events, L2 flushed between calls by do_bench's cache clearing).

    python benchmarks/matmul_sweep.py --out benchmarks/results/matmul-sweep-h100.json
    python benchmarks/matmul_sweep.py --problem level1/matmul_fp16 --out benchmarks/results/matmul-fp16-sweep-h100.json
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import tempfile
from pathlib import Path

import torch
import triton.testing

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.analyze import analyze

CONFIGS = [  # (M, N, K, warps, stages)
    (128, 128, 32, 8, 3), (128, 128, 32, 4, 4), (128, 128, 64, 8, 3), (128, 128, 64, 4, 3),
    (128, 256, 32, 8, 3), (128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (64, 256, 64, 4, 4),
    (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (64, 64, 32, 4, 4), (128, 128, 128, 8, 2),
]
HALF_CONFIGS = [  # (M, N, K, warps, stages, kernel): "tma" (B as it lies), "tma-kmajor" (B transposed), "plain"
    *((*t, "tma") for t in ((128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (256, 128, 64, 8, 3), (256, 128, 64, 8, 4),
                            (128, 128, 64, 8, 4), (128, 128, 64, 4, 4), (128, 256, 32, 8, 4), (128, 128, 128, 8, 3))),
    (128, 256, 64, 8, 3, "tma-kmajor"), (256, 128, 64, 8, 3, "tma-kmajor"),
    (128, 128, 64, 8, 3, "plain"), (128, 256, 64, 8, 3, "plain"), (128, 128, 32, 4, 4, "plain"),
]


def load(source: str):
    path = Path(tempfile.mkdtemp()) / "cand.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("cand", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--problem", default="level1/matmul")
    args = ap.parse_args()
    problem = load_problem(args.problem)
    op = analyze(problem).single
    module = problem.load()
    a, b = (t.cuda() for t in module.get_inputs())
    ref = torch.matmul(a, b)
    eager = triton.testing.do_bench(lambda: torch.matmul(a, b), warmup=50, rep=300)
    rows = []
    half = a.dtype != torch.float32
    sweep = [(None, *c) for c in HALF_CONFIGS] if half else [(prec, *c, "plain") for prec in ("ieee", "tf32")
                                                            for c in CONFIGS]
    for prec, m, n, k, w, s, kernel in sweep:
        params = registry.moves(op)[0].params.but(
            BLOCK_M=m, BLOCK_N=n, BLOCK_K=k, GROUP_M=8, num_warps=w, num_stages=s, precision=prec or "ieee",
            tma=kernel != "plain", gemv=False, b_kmajor=kernel == "tma-kmajor")
        row = {"precision": prec or str(a.dtype).removeprefix("torch."), "kernel": kernel, "tile": [m, n, k],
               "warps": w, "stages": s}
        try:
            model = load(registry.render(op, problem.source, params)).ModelNew().cuda()
            out = model(a, b)
            row["max_rel_error"] = float(((out - ref).abs().max() / ref.abs().max()).item())
            row["ms"] = triton.testing.do_bench(lambda: model(a, b), warmup=50, rep=300)
            row["speedup_eager"] = eager / row["ms"]
        except Exception as exc:  # noqa: BLE001 - a config that does not fit (shared memory) is a result too
            row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    record = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
              "date": datetime.date.today().isoformat(), "method": "triton.testing.do_bench (CUDA events)",
              "problem": f"{args.problem} {'x'.join(map(str, a.shape))} @ {'x'.join(map(str, b.shape))} {a.dtype}",
              "eager_ms": eager, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
