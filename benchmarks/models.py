"""`kernelcraft apply` on the model zoo (kernelcraft.zoo: transformers, torchvision and timm models built from their
configs, random weights, no downloads) at realistic inference sizes, fp32 and bf16: per model its eager,
torch.compile and final times (one method), its end-to-end verdict where kernels went in, the share of its time
replaced and what became of each region; then the geomean of the final models over torch.compile. It writes
each model's file under --work and runs benchmarks/apply.py's runner on it.

    PYTHONPATH=src python benchmarks/models.py --models gpt2,llama,bert --dtypes float32,bfloat16 \\
        --budget-minutes 2 --budgets bert_bfloat16=5,gpt2_bfloat16=3,bert_float32=6 \\
        --out benchmarks/results/models-h200-DATE.json
    PYTHONPATH=src python benchmarks/models.py --gpus 0,1 ...  # two models at once, each alone on its own GPU
    PYTHONPATH=src python benchmarks/models.py --size tiny --device cpu --models gpt2 --out /tmp/zoo.json  # a try

A model whose library does not import here is a row saying so.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import queue
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from kernelcraft import zoo
from provenance import code

HERE = Path(__file__).resolve().parent


def _runner():
    spec = importlib.util.spec_from_file_location("kc_apply_bench", HERE / "apply.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(zoo.ENTRIES), help="comma-separated (default: %(default)s)")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--size", default="real", choices=zoo.SIZES)
    ap.add_argument("--budget-minutes", type=float, default=3.0, help="per model, split among its regions")
    ap.add_argument("--budgets", default="", help="per model (or model_dtype) budgets over --budget-minutes, "
                    "e.g. bert_bfloat16=5,gpt2=3")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=1, help="models applied at once (every timing phase holds the "
                    "device's lock alone; checks overlap)")
    ap.add_argument("--gpus", default="", help="GPU indices, comma-separated: as many models at once, each "
                    "process seeing only its own GPU (in place of --jobs)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per model before it is stopped")
    ap.add_argument("--work", type=Path, default=Path("models-work"))
    ap.add_argument("--out", type=Path, required=True, help="written again as each model ends")
    ap.add_argument("--add-to", type=Path, default=None, help="an earlier record of the same code, device and size "
                    "(a zoo split across calls): its rows are kept, and the models it has are not run again")
    args = ap.parse_args()
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    unknown = [n for n in names if n not in zoo.ENTRIES]
    if unknown:
        ap.error(f"not in the zoo: {', '.join(unknown)} (it has {', '.join(zoo.ENTRIES)})")
    try:
        budgets = {k.strip(): float(v) for k, v in (item.split("=") for item in args.budgets.split(",") if item)}
    except ValueError:
        ap.error(f"--budgets {args.budgets!r}: give NAME=MINUTES pairs, comma-separated")
    if stray := [k for k in budgets if k.split("_")[0] not in zoo.ENTRIES]:
        ap.error(f"--budgets names models not in the zoo: {', '.join(stray)}")
    earlier = _earlier(args.add_to, args.size, ap) if args.add_to else {"models": [], "wall_seconds": 0.0}
    args.earlier_settings = earlier.get("settings")
    done = {row["model"] for row in earlier["models"]}
    files = args.work / "files"
    files.mkdir(parents=True, exist_ok=True)
    args.directory = files
    runner, rows, lock = _runner(), list(earlier["models"]), threading.Lock()
    started = time.time() - earlier["wall_seconds"]
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
    free: queue.Queue = queue.Queue()
    for gpu in gpus or [None]:
        free.put(gpu)
    if gpus:
        args.jobs = len(gpus)

    def one(name: str, dtype: str) -> None:
        stem = f"{name}_{dtype}"
        try:
            zoo.build(name, "tiny", dtype)  # says at once if the library is missing
        except zoo.ZooError as exc:
            row = {"model": stem, "status": "unavailable", "error": str(exc)}
            print(f"{stem}: {exc}", flush=True)
        else:
            (files / f"{stem}.py").write_text(zoo.model_file(name, args.size, dtype))
            gpu = free.get() if gpus else None
            try:
                row = runner._apply(stem, args, budget_of(name, dtype), gpu)
            finally:
                if gpus:
                    free.put(gpu)
            row.update(zoo=name, dtype=dtype, size=args.size, what=zoo.ENTRIES[name].what)
            if gpu is not None:
                row["gpu"] = gpu
            times = row.get("times") or {}
            if times.get("final_ms"):
                row["over_eager"] = times["eager_ms"] / times["final_ms"]
                row["over_compile"] = times["compile_ms"] / times["final_ms"] if times.get("compile_ms") else None
                row["over_compile_graphs"] = times["compile_graphs_ms"] / times["final_ms"] \
                    if times.get("compile_graphs_ms") else None
            ms = {k: f"{v:.4g} ms" if isinstance(v, float) else "-" for k, v in times.items()}
            print(f"{stem:<22} {row.get('status', '?'):<8} eager {ms.get('eager_ms', '-')}, torch.compile "
                  f"{ms.get('compile_ms', '-')} (CUDA graphs {ms.get('compile_graphs_ms', '-')}), given back {ms.get('final_ms', '-')} ({times.get('final')}); "
                  f"its kernels {row.get('final_share') or 0:.0%} of the model's time {row.get('error') or ''}",
                  flush=True)
        with lock:
            rows.append(row)
            _write(args, rows, started)

    def budget_of(name: str, dtype: str) -> float:
        return budgets.get(f"{name}_{dtype}", budgets.get(name, args.budget_minutes))

    # the longest first, so that models running at once end close together
    pairs = sorted(((n, d) for n in names for d in dtypes if f"{n}_{d}" not in done), key=lambda p: -budget_of(*p))
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(lambda pair: one(*pair), pairs))
    record = _write(args, rows, started)
    print(f"geomean of the final models over torch.compile: {record['geomean_speedup_compile']}; over torch.compile "
          f"with CUDA graphs, where measured: {record['geomean_speedup_compile_graphs']}")
    return 0


def _earlier(path: Path, size: str, ap: argparse.ArgumentParser) -> dict:
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        ap.error(f"--add-to {path}: {exc}")
    here = {"code": code(), "device": _device(), "torch": torch.__version__, "size": size}
    there = dict(record, size=(record.get("settings") or {}).get("size"))
    if differs := [f"{k} {there.get(k)}, here {v}" for k, v in here.items() if there.get(k) != v]:
        ap.error(f"--add-to {path} measured other code or on another machine: {'; '.join(differs)}")
    return record


def _device() -> str:
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def _write(args, rows: list[dict], started: float) -> dict:
    record = {
        "what": "kernelcraft apply on the model zoo (built-in engineer)",
        "code": code(),
        "date": datetime.date.today().isoformat(),
        "device": _device(),
        "torch": torch.__version__,
        "settings": {"size": args.size, "budget_minutes": args.budget_minutes, "budgets": args.budgets,
                     "rounds": args.rounds, "jobs": args.jobs, "gpus": args.gpus or None,
                     "earlier_call": args.earlier_settings},
        "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "method": "each model's eager, torch.compile and final times by the verifier's method (cuda events, L2 "
                  "flushed): the end-to-end verdict's where kernels went in, else the model's baselines; "
                  "over_compile = torch.compile's time over the final model's; over_compile_graphs: torch.compile's "
                  "with CUDA graphs (mode=reduce-overhead, verified like a candidate where the model is host-bound), "
                  "over the final model's; with --gpus, models ran at once, each process seeing only its own GPU "
                  "(its row's gpu), the host's CPUs shared",
        "wall_seconds": round(time.time() - started, 1),
        "geomean_speedup_compile": _geomean([r["over_compile"] for r in rows if r.get("over_compile")]),
        "geomean_speedup_compile_graphs": _geomean([r["over_compile_graphs"] for r in rows
                                                    if r.get("over_compile_graphs")]),
        "models": sorted(rows, key=lambda r: r["model"]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1))
    return record


if __name__ == "__main__":
    sys.exit(main())
