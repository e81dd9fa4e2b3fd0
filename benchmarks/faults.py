"""Faults in one batch, and what the guards cost.

    python benchmarks/faults.py --out faults.json

1. A batch mixing an honest candidate with every fault in benchmarks/candidates/faults/ (illegal
   memory access, segfault, host and device infinite loops, CUDA OOM, host memory blow-up, os._exit,
   sys.exit, a fork bomb, a disk fill, a printed fake result), with the static guards OFF so every
   fault really runs and the runtime containment has to catch it. Every honest candidate must come
   back ok; every fault with its status; the supervisor must go on.
2. The same faults with the static guards on: which are refused before running.
3. Guard overhead: honest candidates evaluated with every hardening layer on, then with all off.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))

from kernelcraft.candidate import Candidate  # noqa: E402
from kernelcraft.problems import load_problem  # noqa: E402
from kernelcraft.verify import Job, TimingConfig, Verifier, VerifyConfig  # noqa: E402
from kernelcraft.verify.containment import Limits  # noqa: E402


def rows_of(results, names) -> list[dict]:
    return [{"candidate": n, "status": r.status, "reasons": r.reasons, "wall_seconds": r.wall_seconds,
             "message": (r.message or "")[:300]} for n, r in zip(names, results)]


def fault_batch(device: str, cache: Path, static_guards: bool) -> dict:
    relu = load_problem("level1/relu")
    honest = ROOT / "candidates" / ("cuda_nvrtc" if device != "cpu" else "triton") / "relu.py"
    faults = sorted((ROOT / "candidates" / "faults").glob("*.py"))
    if device == "cpu":
        faults = [f for f in faults if "illegal" not in f.name and "device" not in f.name and "cuda" not in f.name]
    files = [honest]
    for f in faults:
        files += [f, honest]
    config = VerifyConfig(cache_dir=cache, run_timeout=20.0, static_guards=static_guards, compile_baseline=False,
                          small=device == "cpu", timing=TimingConfig(budget_s=1.0),
                          limits=Limits(max_processes=64, max_host_memory=16 << 30, max_disk_bytes=1 << 30))
    start = time.perf_counter()
    with Verifier(device, config) as verifier:
        results = verifier.evaluate_many([Job(relu, Candidate.from_file(f)) for f in files])
        restarts = sum(s.restarts for s in verifier.supervisors)
    wall = time.perf_counter() - start
    rows = rows_of(results, [f"{f.parent.name}/{f.name}" for f in files])
    honest_ok = all(r["status"] == "ok" for r in rows if not r["candidate"].startswith("faults/"))
    faults_not_ok = all(r["status"] != "ok" for r in rows if r["candidate"].startswith("faults/"))
    for r in rows:
        print(f"  {r['candidate']:34s} {r['status']:14s} {','.join(r['reasons']):40s} {r['wall_seconds']:6.1f} s", flush=True)
    print(f"  honest all ok: {honest_ok}; every fault caught: {faults_not_ok}; wall {wall:.1f} s; "
          f"workers replaced after crashes: {restarts}", flush=True)
    return {"static_guards": static_guards, "rows": rows, "wall_s": wall, "honest_all_ok": honest_ok,
            "faults_all_caught": faults_not_ok, "crash_restarts": restarts,
            "containment": results[0].containment}


def overhead(device: str, cache: Path, repeats: int) -> dict:
    kind = "cuda_nvrtc" if device != "cpu" else "triton"
    pairs = [(load_problem(f"level1/{n}"), Candidate.from_file(ROOT / "candidates" / kind / f"{n}.py"))
             for n in ("relu", "gelu", "softmax", "rmsnorm")]
    common = dict(cache_dir=cache, compile_baseline=False, small=device == "cpu", timing=TimingConfig(budget_s=1.0))
    on = VerifyConfig(**common)
    off = VerifyConfig(**common, static_guards=False, determinism=False, attribution=False, clock_check=False,
                       sandbox=False)
    walls = {"on": [], "off": []}
    with Verifier(device, on) as v_on, Verifier(device, off) as v_off:
        for v, name in ((v_on, "on"), (v_off, "off")):  # warm: baselines and builds
            v.evaluate_many([Job(p, c) for p, c in pairs])
        for _ in range(repeats):
            for v, name in ((v_on, "on"), (v_off, "off")):
                results = v.evaluate_many([Job(p, c) for p, c in pairs])
                assert all(r.status == "ok" for r in results), [(r.status, r.reasons, r.message[:200]) for r in results]
                walls[name] += [r.wall_seconds for r in results]
    mean_on, mean_off = statistics.fmean(walls["on"]), statistics.fmean(walls["off"])
    out = {"evaluations_per_mode": len(walls["on"]), "mean_wall_on_s": mean_on, "mean_wall_off_s": mean_off,
           "overhead": mean_on / mean_off - 1, "what": "wall seconds per honest evaluation (worker start to verdict), "
           "all hardening layers on vs off: static guards, determinism re-run, kernel attribution, trusted-clock "
           "cross-check, namespaces"}
    print(f"  guards on {mean_on:.2f} s vs off {mean_off:.2f} s per evaluation: overhead {out['overhead']:+.1%}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--parts", default="runtime,static,overhead")
    args = parser.parse_args()
    name = torch.cuda.get_device_name() if args.device != "cpu" else "cpu"
    report = {"device": name, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")}
    cache = Path(tempfile.mkdtemp(prefix="kc-faults-"))
    parts = args.parts.split(",")
    if "runtime" in parts:
        print("faults, static guards off (the runtime containment catches them)", flush=True)
        report["faults_runtime"] = fault_batch(args.device, cache, static_guards=False)
    if "static" in parts:
        print("faults, static guards on", flush=True)
        report["faults_static"] = fault_batch(args.device, cache, static_guards=True)
    if "overhead" in parts:
        print("guard overhead", flush=True)
        report["overhead"] = overhead(args.device, cache, args.repeats)
    args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
