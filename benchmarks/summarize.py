"""Print the verifier's measurements as Markdown tables from the results JSON of benchmarks/verifier.py and
faults.py: sections to read, or to bring into benchmarks/results/README.md (the current summary) by hand.

    python benchmarks/summarize.py benchmarks/results/verifier-h200-2026-11-22.json \
        benchmarks/results/faults-h200-2026-11-22.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _f(value, fmt: str) -> str:
    return fmt % value if value is not None else "—"


def summarize(path: Path) -> str:
    d = json.loads(path.read_text())
    out = ["# Verifier measurements", "",
           f"Device: {d['device']} ({d['sm_count']} SMs), torch {d['torch']} (CUDA {d['cuda']}), {d['date']}. "
           f"Timing: {d['timing_method']}. Script: `benchmarks/verifier.py`; raw numbers in `{path.name}`.", ""]
    if "compile_latency" in d:
        out += ["## Compile latency", "", "| backend | samples | p50 | p90 | what |", "|---|---|---|---|---|"]
        for k, v in d["compile_latency"].items():
            out.append(f"| {k} | {v['samples']} | {v['p50_s']:.3f} s | {v['p90_s']:.3f} s | "
                       f"{v.get('what', 'NVRTC to cubin, a new source each time')} |")
    if "throughput" in d:
        out += ["", "## Candidates fully evaluated per GPU-minute (batch of 32 level-1 candidates, full sizes, "
                "baselines cached, builds done ahead)", "",
                "| backend | candidates | wall | per GPU-minute | mean wall per candidate | statuses |",
                "|---|---|---|---|---|---|"]
        for k, v in d["throughput"].items():
            out.append(f"| {k} | {v['candidates']} | {v['wall_s']:.1f} s | {v['per_gpu_minute']:.1f} | "
                       f"{v['mean_candidate_wall_s']:.2f} s | {v['statuses']} |")
    if "timing_cv" in d:
        cv = d["timing_cv"]
        out += ["", "## Timing stability", "",
                f"{cv['candidate']} on {cv['problem']} evaluated {cv['repeats']} times: medians "
                f"{min(cv['medians_ms']):.4f}–{max(cv['medians_ms']):.4f} ms, CV across evaluations "
                f"{cv['cv_across_runs']:.3%}; CV within each evaluation at most {max(cv['cv_within_runs']):.2%}."]
    if "seed_baselines" in d:
        out += ["", "## Seed problems: our baselines beside DESIGN.md's", "",
                "| problem | eager ms | torch.compile ms | DESIGN eager | DESIGN compile |", "|---|---|---|---|---|"]
        for r in d["seed_baselines"]:
            out.append(f"| {r['problem']} | {r['eager_ms']:.3f} | {_f(r['compile_ms'], '%.3f')} | "
                       f"{_f(r['design_eager_ms'], '%.3f')} | {_f(r['design_compile_ms'], '%.3f')} |")
    if "candidates" in d:
        out += ["", "## Hand-written candidates (strict policy)", "",
                "| candidate | problem | status | reasons | ms | × eager | × compile | roofline |",
                "|---|---|---|---|---|---|---|---|"]
        for rows in d["candidates"].values():
            for r in rows:
                out.append(f"| {r['candidate']} | {r['problem']} | {r['status']} | {', '.join(r['reasons'])} | "
                           f"{_f(r['runtime_ms'], '%.4f')} | {_f(r['speedup_eager'], '%.2f')} | "
                           f"{_f(r['speedup_compile'], '%.2f')} | {_f(r['roofline_fraction'], '%.2f')} |")
    return "\n".join(out) + "\n"


def summarize_faults(path: Path) -> str:
    d = json.loads(path.read_text())
    out = ["", f"# Faults and the cost of the guards ({d['device']}, torch {d['torch']}, {d['date']})", "",
           f"Script: `benchmarks/faults.py`; raw numbers in `{path.name}`."]
    for key, title in (("faults_runtime", "static guards off: the runtime containment must catch each fault"),
                       ("faults_static", "static guards on")):
        if key not in d:
            continue
        batch = d[key]
        out += ["", f"## One batch, {title}", "", "| candidate | status | reasons | wall s |", "|---|---|---|---|"]
        for r in batch["rows"]:
            out.append(f"| {r['candidate']} | {r['status']} | {', '.join(r['reasons'])} | {r['wall_seconds']} |")
        out.append(f"\nEvery honest candidate ok: {batch['honest_all_ok']}; every fault caught: "
                   f"{batch['faults_all_caught']}; batch wall {batch['wall_s']:.1f} s; workers replaced after "
                   f"crashes: {batch['crash_restarts']}.")
    if "overhead" in d:
        o = d["overhead"]
        out += ["", "## What the guards cost", "",
                f"{o['what']}: {o['mean_wall_on_s']:.2f} s on vs {o['mean_wall_off_s']:.2f} s off over "
                f"{o['evaluations_per_mode']} evaluations each: {o['overhead']:+.1%}. {o.get('note', '')}"]
    if "gpu_tests" in d:
        out += ["", "## GPU tests", "", d["gpu_tests"]]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    source = Path(sys.argv[1])
    sys.stdout.write(summarize(source) + "".join(summarize_faults(Path(p)) for p in sys.argv[2:]))
