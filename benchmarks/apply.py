"""`kernelcraft apply` on whole models (KernelBench level 3 by default) at their published sizes: per model the
regions (share of the model's time, PyTorch's time and the kernel's, what became of each), the end-to-end verdict
of the reassembled model (correct, speedup over eager and torch.compile), the share of the model's time replaced,
what the regions' speedups predict and what Amdahl allows; then the geomean end-to-end speedup over eager, a model
left as it was counting 1.00x (its own PyTorch).

Each model is one `kernelcraft apply … --json` process; `--jobs N` runs N at once on the one GPU (they share it as
any evaluations do: checks overlap, every timing phase holds the device's lock alone).

    PYTHONPATH=src python benchmarks/apply.py ../shared/kernelbench/level3 --only 1_MLP,8_ResNetBasicBlock \\
        --budget-minutes 3 --jobs 2 --out benchmarks/results/apply-level3-h100-DATE.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

DEFAULT = ["1_MLP", "8_ResNetBasicBlock", "9_ResNet18", "43_MinGPTCausalAttention", "44_MiniGPTBlock"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directory", type=Path, help="a directory of KernelBench-format model files")
    ap.add_argument("--only", default=",".join(DEFAULT), help="comma-separated file stems (default: %(default)s)")
    ap.add_argument("--budget-minutes", type=float, default=3.0, help="per model, split among its regions")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=1, help="models applied at once")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--work", type=Path, default=Path("apply-work"), help="each model's --out and the store")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per model before it is stopped")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    names = [n.strip() for n in args.only.split(",") if n.strip()]
    missing = [n for n in names if not (args.directory / f"{n}.py").exists()]
    if missing:
        ap.error(f"no model file for {', '.join(missing)} in {args.directory}")
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(lambda n: _apply(n, args), names))
    speedups = [r["speedup_eager"] for r in rows if r.get("speedup_eager")]
    record = {
        "what": "kernelcraft apply on whole models at their published sizes (built-in engineer)",
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__,
        "settings": {"budget_minutes": args.budget_minutes, "rounds": args.rounds, "jobs": args.jobs},
        "method": "each model's end-to-end verdict is the verifier's (cuda events, L2 flushed, interleaved with "
                  "eager; torch.compile timed alike); a model with nothing replaced runs as it was (1.00x)",
        "wall_seconds": round(time.time() - started, 1),
        "geomean_speedup_eager": math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else None,
        "models": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))
    for r in rows:
        print(f"{r['model']:<28} {r.get('status', '?'):<7} x{r.get('speedup_eager') or 0:.2f} eager  "
              f"x{r.get('speedup_compile') or 0:.2f} compile  replaced {r.get('replaced_share', 0):.0%}  "
              f"{r.get('error') or ''}")
    print(f"geomean over eager: {record['geomean_speedup_eager']}")
    return 0


def _apply(name: str, args, budget_minutes: float | None = None, gpu: str | None = None) -> dict:
    """Apply the model file `name` (args.directory / name.py) with args' settings; `budget_minutes` in place of
    args.budget_minutes where given; `gpu` (an index) is the one GPU its process sees, where given."""
    out = args.work / name
    budget = args.budget_minutes if budget_minutes is None else budget_minutes
    cmd = [sys.executable, "-m", "kernelcraft", "apply", str(args.directory / f"{name}.py"), "--json",
           "--budget-minutes", str(budget), "--rounds", str(args.rounds), "--device", args.device,
           "--store", str(args.work / "runs.db"), "--out", str(out)]
    env = os.environ.copy()
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    t0 = time.time()
    log = args.work / f"{name}.log"  # apply's progress lines, written as they come (a stopped model keeps its log)
    try:
        with log.open("w") as err:
            done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, timeout=args.timeout,
                                  env=env)
    except subprocess.TimeoutExpired:
        return {"model": name, "status": "timeout", "error": f"stopped after {args.timeout} s (its log: {log})"}
    lines = done.stdout.strip().splitlines()
    try:
        summary = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        return {"model": name, "status": "error", "error": (log.read_text().strip().splitlines() or ["?"])[-1][:400],
                "returncode": done.returncode}
    summary["model"] = name
    summary["budget_minutes"] = budget
    summary["wall_seconds"] = round(time.time() - t0, 1)
    for region in summary["regions"]:  # the kernels' full verdicts stay in the store; the record keeps headlines
        result = region.pop("result", None) or {}
        region["speedup_compile"] = result.get("speedup_compile")
    e2e = summary.get("end_to_end") or {}
    summary["end_to_end"] = {k: e2e.get(k) for k in ("status", "correct", "message", "runtime_ms", "eager_ms",
                                                      "compile_ms", "speedup_eager", "speedup_compile",
                                                      "custom_kernel_fraction", "max_rel_error")} if e2e else None
    return summary


if __name__ == "__main__":
    sys.exit(main())
