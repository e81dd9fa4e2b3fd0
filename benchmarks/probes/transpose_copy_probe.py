"""Probe: copying a transposed operand into the K-major rows the TMA GEMMs read, torch's `.contiguous()` against the
GEMM family's own Triton copy kernel (`gemm.kernels.rows_copy`, 64 x 64 tiles, the unit stride of a transposed view
specialized by Triton, so it loads along one axis and stores along the other), at the sizes KernelBench's level-1 3
(B.mT of a (128, 1024, 2048) bmm operand) and 97 (v.mT of (1024, 512, 1024) heads) copy, and one 2-D transpose.

Each copy is checked equal to torch's, then timed with triton.testing.do_bench (CUDA events, median). A diagnosis for
choosing the copy in `gemm/tma.py`'s kc_tma_rows; results of the GEMMs themselves come from the verifier.

    python benchmarks/probes/transpose_copy_probe.py --out probe.json
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import torch
import triton
import triton.testing
from params_probe import loaded
from provenance import code

from kernelcraft.propose.builtin.families.gemm import kernels
from kernelcraft.propose.builtin.family import Names

SHAPES = {"3_bmm_B": (128, 1024, 2048), "97_v": (1024, 512, 1024), "2d": (1, 8192, 8192)}  # the stored (b, K, N)
TILES = [(64, 64, 4), (32, 128, 4), (64, 128, 8), (128, 64, 8)]  # (BLOCK_R, BLOCK_C, warps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    kernel = kernels.rows_copy(Names())
    module = loaded("import torch\nimport triton\nimport triton.language as tl\n\n\n" + kernel.source(), "rows_copy")
    copy = getattr(module, kernel.name)
    rows_out = []
    for label, (b, k, n) in SHAPES.items():
        stored = torch.randn(b, k, n, device="cuda")
        t = stored.mT  # (b, N, K), K-major wanted: the transposed view
        want = t.contiguous()
        row = {"shape": label, "view": list(t.shape), "gb_moved": round(2 * t.numel() * 4 / 1e9, 3),
               "torch_contiguous_ms": round(triton.testing.do_bench(lambda: t.contiguous()), 4)}
        rows_, cols = t.shape[-2], t.shape[-1]
        for br, bc, warps in TILES:
            dst = torch.empty_like(want)

            def run():
                copy[(triton.cdiv(rows_, br) * triton.cdiv(cols, bc), b)](
                    t, dst, rows_, cols, cols, t.stride(0), t.stride(-2), t.stride(-1), BLOCK_R=br, BLOCK_C=bc,
                    num_warps=warps)
            run()
            assert torch.equal(dst, want), label
            row[f"triton_{br}x{bc}_w{warps}_ms"] = round(triton.testing.do_bench(run), 4)
        del stored, want, dst
        torch.cuda.empty_cache()
        print(row, flush=True)
        rows_out.append(row)
    record = {"what": "transposed-operand copy into K-major rows: torch .contiguous() against the GEMM family's "
                      "Triton rows copy (benchmarks/probes/transpose_copy_probe.py)",
              "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
              "date": datetime.date.today().isoformat(), "code": code(),
              "method": "triton.testing.do_bench: CUDA events, median", "rows": rows_out}
    args.out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
