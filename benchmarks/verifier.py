"""Measure the verifier on a GPU: compile latency, candidates per GPU-minute, timing stability,
baselines of the seed problems, and the hand-written candidates (honest and wrong). Faults and
the cost of the guards are measured by benchmarks/faults.py.

    python benchmarks/verifier.py --parts compile,seeds,candidates --out results.json
    python benchmarks/verifier.py --parts throughput,cv --out results2.json

Each part adds a section to the JSON; the device, torch version and date are recorded with it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))

from kernelcraft.candidate import Candidate  # noqa: E402
from kernelcraft.problems import load_problem, suite_names  # noqa: E402
from kernelcraft.result import Result  # noqa: E402
from kernelcraft.verify import speed  # noqa: E402
from kernelcraft.verify import Job, TimingConfig, Verifier, VerifyConfig  # noqa: E402

SEEDS = ["level1/matmul", "level1/conv2d_alexnet", "level1/softmax", "level1/layernorm",
         "level2/conv2d_relu_maxpool", "level1/matmul_fp16", "level1/sdpa_causal_fp16"]
# Eager / torch.compile ms from DESIGN.md (H200, torch 2.11+cu130), for comparison.
DESIGN_MS = {"level1/matmul": (2.695, 2.675), "level1/conv2d_alexnet": (0.830, 0.656),
             "level1/softmax": (1.053, 0.780), "level1/layernorm": (8.096, 0.322),
             "level2/conv2d_relu_maxpool": (1.001, 0.700), "level1/matmul_fp16": (0.197, None),
             "level1/sdpa_causal_fp16": (1.177, None)}


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def problem_for(path: Path) -> str:
    """`# problem: levelN/name` in the file, else the suite name equal to its stem, else the longest
    level-1 name its stem starts with (wrong/relu_off_by_one.py -> level1/relu)."""
    m = re.search(r"^#\s*problem:\s*(\S+)", path.read_text(), re.M)
    if m:
        return m.group(1)
    exact = [n for n in suite_names() if n.split("/")[1] == path.stem]
    if exact:
        return exact[0]
    names = [n for n in suite_names() if n.startswith("level1/") and path.stem.startswith(n.split("/")[1])]
    return max(names, key=len) if names else f"level1/{path.stem}"


def candidates(kind: str) -> list[tuple[str, Path]]:
    return [(problem_for(p), p) for p in sorted((ROOT / "candidates" / kind).glob("*.py"))]


def part_compile(n: int) -> dict:
    from kernelcraft.backends.nvrtc import compile_cubin
    from kernelcraft.verify.build import run_build

    out = {}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["KERNELCRAFT_CACHE"] = cache
        times = []
        for k in range(n):
            src = (f'extern "C" __global__ void scale{k}(const float* x, float* y, long long n) {{\n'
                   f"  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
                   f"  if (i < n) y[i] = x[i] * {k + 1}.5f + {k}.0f; }}\n")
            t = time.perf_counter()
            compile_cubin(src, "sm_90a")
            times.append(time.perf_counter() - t)
        out["cuda_nvrtc"] = {"samples": n, "p50_s": percentile(times, 50), "p90_s": percentile(times, 90)}

        os.environ["TRITON_CACHE_DIR"] = str(Path(cache) / "triton")
        import triton  # noqa: F401

        times = []
        x = torch.randn(1 << 20, device="cuda")
        for k in range(n):
            path = Path(cache) / f"tk{k}.py"  # triton reads the function's source from its file
            path.write_text(f"import triton\nimport triton.language as tl\n@triton.jit\ndef k{k}(x, y, n, B: tl.constexpr):\n"
                            f"    o = tl.program_id(0) * B + tl.arange(0, B)\n    m = o < n\n"
                            f"    tl.store(y + o, tl.load(x + o, mask=m) * {k + 1}.5 + {k}.0, mask=m)\n")
            import importlib.util

            spec = importlib.util.spec_from_file_location(f"tk{k}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            y = torch.empty_like(x)
            torch.cuda.synchronize()
            t = time.perf_counter()
            getattr(mod, f"k{k}")[(x.numel() // 1024,)](x, y, x.numel(), B=1024)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        out["triton"] = {"samples": n, "p50_s": percentile(times, 50), "p90_s": percentile(times, 90),
                         "what": "first launch of a new @triton.jit kernel (JIT compile + load + run)"}

        from concurrent.futures import ThreadPoolExecutor

        if not (ROOT / "candidates" / "cuda_inline" / "relu.py").exists():
            return out
        base = (ROOT / "candidates" / "cuda_inline" / "relu.py").read_text()
        variants = [base.replace("#include <torch/extension.h>", f"#include <torch/extension.h>\n// variant {k}", 1)
                    for k in range(4)]
        with ThreadPoolExecutor(4) as pool:
            builds = list(pool.map(lambda s: run_build(s, Path(cache) / "inline", "9.0", 900), variants))
        times = [b.seconds for b in builds]
        out["cuda_inline"] = {"samples": len(times), "p50_s": percentile(times, 50), "p90_s": percentile(times, 90),
                              "ok": [b.ok for b in builds], "what": "load_inline build in a fresh process, 4 at once"}
    os.environ.pop("KERNELCRAFT_CACHE")
    return out


def evaluate_files(verifier: Verifier, pairs) -> list[dict]:
    jobs = [Job(load_problem(p), Candidate.from_file(f)) for p, f in pairs]
    start = time.perf_counter()
    results = verifier.evaluate_many(jobs)
    wall = time.perf_counter() - start
    rows = []
    for (p, f), r in zip(pairs, results):
        d = r.to_dict()
        rows.append({"problem": p, "candidate": f"{f.parent.name}/{f.name}", "backend": r.backend,
                     **{k: d[k] for k in ("status", "reasons", "max_rel_error", "runtime_ms", "eager_ms",
                                          "compile_ms", "speedup_eager", "speedup_compile", "roofline_fraction",
                                          "compile_seconds", "wall_seconds")},
                     "message": (r.message or "")[:400]})
    return rows, wall


def part_seeds(verifier: Verifier) -> list[dict]:
    sup = verifier.supervisors[0]
    rows = []
    for name in SEEDS:
        eager, compiled = speed.measure_baselines(sup, load_problem(name), Result(name, "baseline", ""))
        design = DESIGN_MS.get(name, (None, None))
        rows.append({"problem": name, "eager_ms": eager.median_ms, "eager_cv": eager.cv,
                     "compile_ms": compiled.median_ms if compiled else None,
                     "design_eager_ms": design[0], "design_compile_ms": design[1]})
        print(f"  {name:32s} eager {eager.median_ms:.3f} ms  compile "
              f"{compiled.median_ms if compiled else float('nan'):.3f} ms  (DESIGN {design})", flush=True)
    return rows


def part_candidates(verifier: Verifier) -> dict:
    out = {}
    for kind in ("cuda_nvrtc", "triton", "cuda_inline", "wrong"):
        if not candidates(kind):
            continue
        rows, wall = evaluate_files(verifier, candidates(kind))
        out[kind] = rows
        for r in rows:
            print(f"  {r['candidate']:40s} {r['status']:14s} {str(r['reasons']):40s} "
                  f"x{r['speedup_eager'] or 0:.2f} eager x{r['speedup_compile'] or 0:.2f} compile", flush=True)
    return out


def part_throughput(verifier: Verifier, size: int, backends=("cuda_nvrtc", "triton", "cuda_inline")) -> dict:
    out = {}
    for kind in backends:
        pairs = [(p, f) for p, f in candidates(kind) if p.startswith("level1/")]
        if not pairs:
            continue
        # warm the baselines (and builds) so the batch measures the per-candidate path only
        evaluate_files(verifier, pairs)
        jobs = []
        for k in range(size):
            p, f = pairs[k % len(pairs)]
            src = f.read_text()
            if kind == "cuda_nvrtc":  # a new kernel source each time: NVRTC really compiles
                src = src.replace('extern "C"', f'// variant {k}\nextern "C"', 1)
            jobs.append(Job(load_problem(p), Candidate(src + f"\n# variant {k}\n", f"{f.stem}-v{k}")))
        start = time.perf_counter()
        results = verifier.evaluate_many(jobs)
        wall = time.perf_counter() - start
        out[kind] = {"candidates": size, "wall_s": wall, "per_gpu_minute": size / (wall / 60),
                     "statuses": {str(s): sum(r.status == s for r in results) for s in {r.status for r in results}},
                     "mean_candidate_wall_s": statistics.fmean(r.wall_seconds for r in results)}
        print(f"  {kind}: {size} candidates in {wall:.1f} s = {out[kind]['per_gpu_minute']:.1f}/GPU-min "
              f"{out[kind]['statuses']}", flush=True)
    return out


def part_cv(verifier: Verifier, repeats: int) -> dict:
    f = ROOT / "candidates" / "triton" / "softmax.py"
    jobs = [Job(load_problem("level1/softmax"), Candidate.from_file(f)) for _ in range(repeats)]
    results = verifier.evaluate_many(jobs)
    medians = [r.runtime_ms for r in results if r.runtime_ms]
    out = {"candidate": "triton/softmax.py", "problem": "level1/softmax", "repeats": len(medians),
           "medians_ms": medians, "cv_across_runs": statistics.pstdev(medians) / statistics.fmean(medians),
           "cv_within_runs": [r.runtime.cv for r in results if r.runtime]}
    print(f"  CV across {len(medians)} evaluations: {out['cv_across_runs']:.3%} (median {statistics.median(medians):.4f} ms)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--parts", default="compile,seeds,candidates,throughput,cv")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--backends", default="cuda_nvrtc,triton,cuda_inline", help="for the throughput part")
    parser.add_argument("--compile-samples", type=int, default=20)
    parser.add_argument("--baselines", type=Path, help="start from this baselines cache file")
    parser.add_argument("--save-baselines", type=Path, help="write the baselines cache here at the end")
    args = parser.parse_args()
    parts = args.parts.split(",")
    props = torch.cuda.get_device_properties(0)
    report = {"device": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
              "date": time.strftime("%Y-%m-%d"), "timing_method": "cuda_events+l2_flush, median",
              "sm_count": props.multi_processor_count}
    cache = Path(tempfile.mkdtemp(prefix="kc-bench-"))
    if args.baselines and args.baselines.exists():  # baselines measured by an earlier call, same GPU and torch
        (cache / "baselines.json").write_text(args.baselines.read_text())
    config = VerifyConfig(cache_dir=cache, timing=TimingConfig())
    with Verifier("cuda", config) as verifier:
        if "compile" in parts:
            print("compile latency", flush=True)
            report["compile_latency"] = part_compile(args.compile_samples)
            print(json.dumps(report["compile_latency"]), flush=True)
        if "seeds" in parts:
            print("seed baselines", flush=True)
            report["seed_baselines"] = part_seeds(verifier)
        if "candidates" in parts:
            print("hand-written candidates", flush=True)
            report["candidates"] = part_candidates(verifier)
        if "throughput" in parts:
            print("throughput", flush=True)
            report["throughput"] = part_throughput(verifier, args.batch, args.backends.split(","))
        if "cv" in parts:
            print("timing CV", flush=True)
            report["timing_cv"] = part_cv(verifier, 10)
    args.out.write_text(json.dumps(report, indent=1))
    if args.save_baselines and (cache / "baselines.json").exists():
        args.save_baselines.write_text((cache / "baselines.json").read_text())


if __name__ == "__main__":
    main()
