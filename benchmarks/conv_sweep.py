"""Tile and precision sweep for the built-in engineer's implicit-GEMM convolution, on level1/conv2d_alexnet
(100x3x224x224, 96 filters 11x11, stride 4, padding 2). Each config is rendered through the real family
(registry.render on the conv family's ConvTiles), compared with an fp64 reference by the verifier's own metric
(verify.check.compare, both policies), and timed with triton.testing.do_bench (CUDA events). The same is recorded
for eager PyTorch with its default conv precision and with cuDNN's TF32 turned off, so the baseline's own precision
is known.

    python benchmarks/conv_sweep.py --out benchmarks/results/conv-sweep-h100.json
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import torch
import triton.testing

from benchmarks.matmul_sweep import load
from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.families.conv import ConvTiles
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.verify.check import compare
from kernelcraft.verify.policy import POLICIES

CONFIGS = [  # (M, N, K, warps, stages)
    (128, 128, 32, 8, 3), (128, 128, 16, 8, 3), (64, 128, 32, 4, 4), (64, 128, 16, 4, 4), (256, 128, 16, 8, 3),
    (256, 128, 32, 8, 3), (128, 128, 64, 8, 2), (128, 64, 32, 4, 4), (64, 64, 32, 4, 4),
]


def conv_op(conv: torch.nn.Conv2d, path: str, steps=()) -> Op:
    return Op("conv2d", {"stride": list(conv.stride), "padding": list(conv.padding), "dilation": list(conv.dilation),
                         "groups": conv.groups, "weight": f"{path}.weight",
                         "bias": f"{path}.bias" if conv.bias is not None else None, "steps": [list(s) for s in steps]})


def errors(out: torch.Tensor, ref: torch.Tensor) -> dict:
    return {name: round(compare(out.float(), ref.float(), policy).max_rel_error, 8) for name, policy in POLICIES.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--precisions", default="ieee,tf32x3,tf32")
    args = ap.parse_args()
    problem = load_problem("level1/conv2d_alexnet")
    module = problem.load()
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).cuda()
    (x,) = (t.cuda() for t in module.get_inputs())
    with torch.no_grad():
        ref = torch.nn.functional.conv2d(x.double(), model.conv.weight.double(), model.conv.bias.double(),
                                         model.conv.stride, model.conv.padding)
        record = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                  "date": datetime.date.today().isoformat(), "method": "triton.testing.do_bench (CUDA events)",
                  "problem": "level1/conv2d_alexnet", "cudnn_allow_tf32_default": torch.backends.cudnn.allow_tf32,
                  "error_metric": "verify.check.compare max relative error vs an fp64 conv (strict tol 1e-4)"}
        baselines = {}
        for name, tf32 in (("eager_default", torch.backends.cudnn.allow_tf32), ("eager_no_tf32", False)):
            torch.backends.cudnn.allow_tf32 = tf32
            out = model(x)
            baselines[name] = {"ms": triton.testing.do_bench(lambda: model(x), warmup=50, rep=300), **errors(out, ref)}
        torch.backends.cudnn.allow_tf32 = record["cudnn_allow_tf32_default"]
        compiled = torch.compile(model)
        compiled(x)
        baselines["compile_default"] = {"ms": triton.testing.do_bench(lambda: compiled(x), warmup=50, rep=300)}
        record["baselines"] = baselines
        print(json.dumps(record), flush=True)
        op = conv_op(model.conv, "conv")
        rows = []
        for prec in args.precisions.split(","):
            for m, n, k, w, s in CONFIGS:
                params = ConvTiles(BLOCK_M=m, BLOCK_N=n, BLOCK_K=k, GROUP_M=8, num_warps=w, num_stages=s,
                                   precision=prec)
                row = {"precision": prec, "tile": [m, n, k], "warps": w, "stages": s}
                try:
                    torch.manual_seed(0)
                    new = load(registry.render(op, problem.source, params)).ModelNew(*module.get_init_inputs()).cuda()
                    new.load_state_dict(model.state_dict())
                    row.update(errors(new(x), ref))
                    row["ms"] = triton.testing.do_bench(lambda: new(x), warmup=50, rep=300)
                    row["speedup_eager"] = round(baselines["eager_default"]["ms"] / row["ms"], 4)
                except Exception as exc:  # noqa: BLE001 - a config that does not fit (shared memory) is a result too
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                rows.append(row)
                print(json.dumps(row), flush=True)
    record["rows"] = rows
    if args.out:
        args.out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
