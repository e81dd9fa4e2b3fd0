"""Every kernel language's bundled examples (src/kernelcraft/examples), judged by the verifier on this machine at
full size (small sizes on a CPU): each verdict, the time a call, the speedups over PyTorch eager and torch.compile,
and the share of the device time in the example's own kernels. The wrong twins must come back `incorrect`. The
device, the versions of torch and of each language's package, the date and the code commit are recorded with them.

    OUT=/tmp/out python benchmarks/languages.py --commit $(git rev-parse --short HEAD) [--backends cute,tilelang]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kernelcraft.backends import detect_backend, get_backend  # noqa: E402
from kernelcraft.candidate import EXAMPLES, Candidate  # noqa: E402
from kernelcraft.problems import load_problem  # noqa: E402
from kernelcraft.verify import Job, Verifier, VerifyConfig  # noqa: E402

PROBLEMS = {"softmax": "level1/softmax", "matmul": "level1/matmul"}


def version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def examples(device_type: str, backends: set[str] | None = None) -> list[tuple[str, Path]]:
    """(problem, example) for every bundled example whose language runs here (of `backends`, where given)."""
    out = []
    for path in sorted(EXAMPLES.glob("*.py")):
        backend = detect_backend(path.read_text())
        if get_backend(backend).unavailable(device_type) is None and (backends is None or backend in backends):
            out.append((PROBLEMS[path.stem.split("_")[0]], path))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--commit", default=None, help="the code commit measured (this machine's checkout may have none)")
    ap.add_argument("--out", default=None, help="the JSON file (default: $OUT/languages.json)")
    ap.add_argument("--backends", default=None, help="comma-separated backends to judge (default: every one here)")
    args = ap.parse_args()
    out = Path(args.out or Path(os.environ.get("OUT", ".")) / "languages.json")
    device = torch.device(args.device)
    chosen = examples(device.type, set(args.backends.split(",")) if args.backends else None)
    config = VerifyConfig(cache_dir=Path(tempfile.mkdtemp(prefix="kc-languages-")), small=device.type == "cpu")
    with Verifier(args.device, config) as v:
        results = v.evaluate_many([Job(load_problem(p), Candidate.from_file(path)) for p, path in chosen])
    rows = []
    for (problem, path), r in zip(chosen, results):
        rows.append({"example": path.stem, "backend": r.backend, "problem": problem, "status": str(r.status),
                     "expected": "incorrect" if path.stem.endswith("_wrong") else "ok", "reasons": r.reasons,
                     "runtime_ms": r.runtime_ms, "eager_ms": r.eager_ms, "compile_ms": r.compile_ms,
                     "kernel_compile_seconds": r.compile_seconds, "kernels_resources": r.kernels_resources,
                     "speedup_eager": r.speedup_eager, "speedup_compile": r.speedup_compile,
                     "custom_kernel_fraction": r.custom_kernel_fraction, "timing_method": r.runtime.method
                     if r.runtime else None, "message": r.message[-600:]})
        figures = " ".join(f"{k.get('registers')} regs/{k.get('smem')} B smem" for k in r.kernels_resources)
        print(f"{path.stem:24} {r.backend:11} {str(r.status):10} "
              f"{'' if r.runtime_ms is None else f'{r.runtime_ms:.4g} ms':>12} "
              f"{'' if r.speedup_eager is None else f'{r.speedup_eager:.3g}x eager':>14} "
              f"{'' if r.speedup_compile is None else f'{r.speedup_compile:.3g}x compile':>16} "
              f"{'' if r.compile_seconds is None else f'built in {r.compile_seconds:.3g} s':>16} {figures}",
              flush=True)
    record = {"what": "the bundled examples of every kernel language, judged at full size (benchmarks/languages.py)",
              "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "torch": torch.__version__, "triton": version("triton"), "helion": version("helion"),
              "nvidia-cutlass-dsl": version("nvidia-cutlass-dsl"), "tilelang": version("tilelang"),
              "date": datetime.date.today().isoformat(), "code": args.commit, "rows": rows,
              "as_expected": all(r["status"] == r["expected"] for r in rows)}
    out.write_text(json.dumps(record, indent=1))
    print(f"wrote {out}; every verdict as expected: {record['as_expected']}")


if __name__ == "__main__":
    main()
