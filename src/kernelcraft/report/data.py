"""What a report shows, gathered from the run store into plain dicts (JSON-ready): a run, a bench, two
of either side by side. The terminal views, the HTML page and `--json` all render these dicts.

Definitions the report relies on:

* A run's *best kernel* at a round is its fastest correct candidate up to and including that round, where
  "faster" means beyond the measured spread: candidates are taken by round, then key, and a later one
  displaces the best only when its median time is below the best's by more than half the sum of their
  IQRs (ranking.py); a difference inside the spread keeps the earlier kernel. The search itself
  and `kernelcraft runs show` use the same order.
* *% of eager* is PyTorch eager's time over the kernel's time, as a percentage (200% = twice as fast),
  both from the kernel's own result.
* An idea *paid off* when at least one candidate implementing it was correct and faster, beyond the
  spread, than the kernel it started from: its parent candidate's time when the parent was correct, else
  (written from the reference, or from a parent that was not correct) PyTorch eager's time from the
  candidate's result.
"""

from __future__ import annotations

from kernelcraft.ledger import resolve, stored_counts, trajectory
from kernelcraft.metrics import bench_metrics, fast_p
from kernelcraft.ranking import clearly_faster
from kernelcraft.records import CandidateRecord, IdeaRecord
from kernelcraft.result import Result
from kernelcraft.store import Store, StoreError

PAYOFF_DEFINITION = ("An idea paid off when at least one candidate implementing it was correct and faster than "
                     "the kernel it started from, by more than the timings' spread (half the sum of their IQRs): "
                     "its parent candidate when that was correct, else PyTorch eager "
                     "(a candidate written from the reference, or from a parent that was not correct).")
LOG_TAIL = 20_000  # characters of a compile log or message kept for the drill-down


def gather(store: Store, ident: str) -> dict:
    kind, found = resolve(store, ident)
    if kind == "apply":
        return apply_report(store, found)
    return bench_report(store, found) if kind == "bench" else run_report(store, found)


def apply_report(store: Store, apply_id: str) -> dict:
    """An apply (kernelcraft apply): its stored outcome (the regions, the model end to end) and each region's run."""
    row = store.apply(apply_id)
    summary = row.summary or {"apply_id": row.id, "model": row.model, "regions": []}
    runs = [run_report(store, r.id) for r in store.runs(apply_id=row.id)]
    return {"kind": "apply", "apply": {**summary, "status": row.status, "created": row.created},
            "cpu_timings": summary.get("device") == "cpu" or any(r["cpu_timings"] for r in runs), "runs": runs}


# one run -------------------------------------------------------------------------------------------
def run_report(store: Store, run_id: str) -> dict:
    row = store.run(run_id)
    rows = store.candidates(row.id)
    results = store.results(row.id)
    by_id = {c.id: c for c in rows}
    profiles = store.profiles(row.id)  # --profile: Nsight Compute's counters, for the kernels profiled
    cands = [_candidate(c, results.get(c.id), by_id) | {"profile": profiles.get(c.id)} for c in rows]
    traj = trajectory(rows)
    best = next((c for c in cands if c["id"] == row.best_candidate), None)
    counts = stored_counts(store, row.id, rows)
    timing = {r.runtime.method for r in results.values() if r.runtime}
    cpu = row.device == "cpu" or any(m and m.startswith("cpu") for m in timing)
    run = {"run_id": row.id, "bench_id": row.bench_id, "apply_id": row.apply_id, "problem": row.problem,
           "strategy": row.strategy, "proposer": row.proposer, "device": row.device, "status": row.status,
           "stop_reason": row.stop_reason, "created": row.created,
           "wall_seconds": row.wall_seconds, "rounds": max((t["round"] for t in traj), default=0),
           "config": row.spec.run.to_dict()}
    summary = _problem_row(run, best, counts)
    judged_on = sorted({r.device for r in results.values() if r.device})
    return {"kind": "run", "run": run, "cpu_timings": cpu, "timing_methods": sorted(m for m in timing if m),
            "judged_on": judged_on, "mixed_devices": mixed_devices(judged_on),
            "counts": counts, "problems": [summary], "trajectory": traj,
            "improvements": improvements(traj, {c["key"]: c for c in cands}),
            "rounds": _rounds(cands), "categories": categories(store.ideas(row.id), cands),
            "payoff_definition": PAYOFF_DEFINITION,
            "best": _best(best, by_id), "candidates": cands}


def mixed_devices(names: list[str]) -> str | None:
    """The warning for candidates judged on devices of more than one type (a mixed cluster), else None."""
    if len(names) < 2:
        return None
    return (f"judged on {len(names)} device types ({', '.join(names)}): each speedup is against its own device's "
            "baselines; compare speedups within one device type")


def pct_of_eager(eager_ms: float | None, runtime_ms: float | None) -> float | None:
    """PyTorch eager's time over the kernel's, in percent (200 = twice as fast as eager)."""
    if not eager_ms or not runtime_ms:
        return None
    return 100.0 * eager_ms / runtime_ms


def improvements(traj: list[dict], cands_by_key: dict[str, dict]) -> list[dict]:
    """The rounds where the best kernel changed: its time, % of eager, and the idea that produced it."""
    out, last = [], None
    for t in traj:
        if t["best_key"] is None or t["best_key"] == last:
            continue
        last = t["best_key"]
        c = cands_by_key[last]
        out.append({"round": t["round"], "key": c["key"], "candidate": c["id"], "runtime_ms": c["runtime_ms"],
                    "eager_ms": c["eager_ms"], "compile_ms": c["compile_ms"],
                    "pct_of_eager": pct_of_eager(c["eager_ms"], c["runtime_ms"]),
                    "speedup_eager": c["speedup_eager"], "speedup_compile": c["speedup_compile"],
                    "idea": c["idea"], "category": c["category"]})
    return out


def categories(ideas: list[IdeaRecord], cands: list[dict]) -> list[dict]:
    """Per idea category: ideas proposed, ideas implemented, ideas that paid off, candidates and correct ones."""
    by_idea: dict[int, list[dict]] = {}
    for c in cands:
        if c["idea_id"] is not None:
            by_idea.setdefault(c["idea_id"], []).append(c)
    out: dict[str, dict] = {}
    for idea in ideas:
        mine = by_idea.get(idea.id, [])
        row = out.setdefault(idea.category, {"category": idea.category, "ideas": 0, "implemented": 0,
                                                "paid_off": 0, "candidates": 0, "correct": 0})
        row["ideas"] += 1
        row["implemented"] += bool(mine)
        row["paid_off"] += any(c["paid_off"] for c in mine)
        row["candidates"] += len(mine)
        row["correct"] += sum(1 for c in mine if c["correct"])
    return sorted(out.values(), key=lambda r: (-r["ideas"], r["category"]))


def _candidate(c: CandidateRecord, result: Result | None, by_id: dict[int, CandidateRecord]) -> dict:
    r = result or Result(c.key, "", c.backend)  # not evaluated: every figure None
    parent = by_id.get(c.parent) if c.parent is not None else None
    correct = bool(c.correct)
    if parent is not None and parent.correct and parent.runtime_ms:
        baseline, against = parent.spread, "parent"
    else:
        baseline, against = r.spread("eager"), "eager"
    paid = bool(correct and baseline and clearly_faster(c.spread, baseline))
    rt = r.runtime
    return {"id": c.id, "key": c.key, "round": c.round, "origin": c.origin, "backend": c.backend,
            "idea_id": c.idea_id, "idea": c.idea, "category": c.category,
            "parent": parent.key if parent else None, "status": c.state,
            "correct": correct, "parse_error": c.parse_error, "reasons": list(r.reasons),
            "message": _tail(r.message), "compile_log": _tail(r.compile_log),
            "compile_seconds": r.compile_seconds, "max_rel_error": r.max_rel_error,
            "runtime_ms": c.runtime_ms, "eager_ms": r.eager_ms, "compile_ms": r.compile_ms,
            "speedup_eager": c.speedup_eager, "speedup_compile": c.speedup_compile,
            "pct_of_eager": pct_of_eager(r.eager_ms, c.runtime_ms),
            "iqr_ms": rt.iqr_ms if rt else None, "cv": rt.cv if rt else None, "samples": rt.samples if rt else None,
            "timing": rt.method if rt else None,
            "roofline_ms": r.roofline_ms, "roofline_fraction": r.roofline_fraction,
            "duplicate": r.duplicate, "notes": list(r.notes),
            "paid_off": paid, "payoff_baseline": against if correct else None, "source": c.source}


def _tail(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= LOG_TAIL else f"[… {len(text) - LOG_TAIL} characters left out]\n" + text[-LOG_TAIL:]


def _rounds(cands: list[dict]) -> list[dict]:
    """Every candidate's round and speedup over eager (None where not correct), for the scatter plot."""
    return [{"round": c["round"], "key": c["key"], "correct": c["correct"], "speedup_eager": c["speedup_eager"]
             if c["correct"] else None} for c in cands]


def _best(best: dict | None, by_id: dict) -> dict | None:
    if best is None:
        return None
    return {k: best[k] for k in ("id", "key", "round", "idea", "category", "backend", "runtime_ms", "eager_ms",
                                 "compile_ms", "speedup_eager", "speedup_compile", "pct_of_eager", "roofline_ms",
                                 "roofline_fraction", "max_rel_error", "timing", "source", "profile")}


def _problem_row(run: dict, best: dict | None, counts: dict) -> dict:
    b = best or {}
    return {"problem": run["problem"], "run_id": run["run_id"], "status": run["status"], "correct": best is not None,
            "runtime_ms": b.get("runtime_ms"), "eager_ms": b.get("eager_ms"), "compile_ms": b.get("compile_ms"),
            "speedup_eager": b.get("speedup_eager"), "speedup_compile": b.get("speedup_compile"),
            "pct_of_eager": b.get("pct_of_eager"), "roofline_ms": b.get("roofline_ms"),
            "roofline_fraction": b.get("roofline_fraction"), "candidates": counts["candidates"],
            "correct_candidates": counts["by_status"].get("ok", 0), "rounds": run["rounds"],
            "tokens": counts["input_tokens"] + counts["output_tokens"], "cost": counts["cost"]}


def _skipped_row(problem: str, why: str, status: str = "not_covered") -> dict:
    """A bench problem that started no run (the proposer could not cover it, or the device cannot hold it):
    no kernel, counted as not correct."""
    return {"problem": problem, "run_id": None, "status": status, "correct": False, "reason": why,
            "runtime_ms": None, "eager_ms": None, "compile_ms": None, "speedup_eager": None, "speedup_compile": None,
            "pct_of_eager": None, "roofline_ms": None, "roofline_fraction": None, "candidates": 0,
            "correct_candidates": 0, "rounds": 0, "tokens": 0, "cost": 0.0}


# a bench -------------------------------------------------------------------------------------------
def bench_report(store: Store, bench_id: str) -> dict:
    """Every run of a bench, its per-problem table, fast_p (over a grid of p, too) and geomean speedups.
    Problems the proposer could not cover, or the device could not hold, started no run; the bench lists them,
    and they count as problems without a correct kernel (status not_covered or too_large), as KernelBench
    counts them."""
    bench = store.bench(bench_id)
    if bench is None:
        raise StoreError(f"no bench {bench_id!r} in {store.path}")
    runs = [run_report(store, r.id) for r in store.runs(bench_id=bench_id)]
    rows = [r["problems"][0] for r in runs] + [
        _skipped_row(name, why, status) for status in ("not_covered", "too_large")
        for name, why in bench.skipped(status).items()]
    return {"kind": "bench", "bench": {"bench_id": bench_id, "suite": bench.suite, "created": bench.created,
                                       "config": bench.spec.run.to_dict()},
            "cpu_timings": any(r["cpu_timings"] for r in runs), "problems": rows, "metrics": bench_metrics(rows),
            "mixed_devices": mixed_devices(sorted({d for r in runs for d in r["judged_on"]})),
            "fast_p_curve": fast_p_curve(rows), "categories": _merge_categories(runs), "counts": _sum_counts(runs),
            "payoff_definition": PAYOFF_DEFINITION, "runs": runs}


def fast_p_curve(rows: list[dict], points: int = 61) -> dict:
    """fast_p at evenly spaced p from 0 to a little past the largest speedup, vs eager and vs compile."""
    top = max([r[f"speedup_{b}"] or 0 for r in rows for b in ("eager", "compile")] + [1.0])
    ps = [round(top * 1.1 * i / (points - 1), 6) for i in range(points)]
    out = {"p": ps}
    for base in ("eager", "compile"):
        speedups = [r[f"speedup_{base}"] if r["correct"] else None for r in rows]
        out[base] = [fast_p(speedups, p) for p in ps]
    return out


def _merge_categories(runs: list[dict]) -> list[dict]:
    merged: dict[str, dict] = {}
    for r in runs:
        for row in r["categories"]:
            m = merged.setdefault(row["category"], dict.fromkeys(row, 0) | {"category": row["category"]})
            for k, v in row.items():
                if k != "category":
                    m[k] += v
    return sorted(merged.values(), key=lambda r: (-r["ideas"], r["category"]))


def _sum_counts(runs: list[dict]) -> dict:
    keys = ("calls", "failed_calls", "input_tokens", "output_tokens", "cost", "unpriced_calls", "candidates",
            "evaluated", "malformed")
    return {k: sum(r["counts"][k] for r in runs) for k in keys}


# side by side --------------------------------------------------------------------------------------
COMPARED = {"problem": "problem", "strategy": "strategy", "proposer": "proposer", "device": "device",
            "status": "status", "best_ms": "best kernel", "speedup_eager": "× eager", "speedup_compile": "× compile",
            "candidates": "candidates", "correct": "correct", "rounds": "rounds", "calls": "calls", "tokens": "tokens",
            "cost": "cost", "wall_seconds": "wall"}  # field: label


def compare(a: dict, b: dict) -> dict:
    """Two run reports or two bench reports side by side."""
    if a["kind"] != b["kind"] or a["kind"] == "apply":
        raise ValueError("compare two runs or two benches (not a run with a bench, nor applies)")
    if a["kind"] == "run":
        return {"kind": "compare_runs", "a": a, "b": b, "warnings": _unlike(_headline(a), _headline(b)), "rows": [
            {"field": f, "label": label, "a": _headline(a)[f], "b": _headline(b)[f]} for f, label in COMPARED.items()]}
    problems = sorted({r["problem"] for r in a["problems"]} | {r["problem"] for r in b["problems"]})
    pa, pb = ({r["problem"]: r for r in x["problems"]} for x in (a, b))
    rows = [{"problem": p, "a": pa.get(p), "b": pb.get(p)} for p in problems]
    return {"kind": "compare_benches", "a": a, "b": b, "rows": rows}


def _unlike(a: dict, b: dict) -> list[str]:
    """What makes two runs' figures not comparable side by side: another problem, another device."""
    out = []
    if a["problem"] != b["problem"]:
        out.append(f"A and B are runs of different problems ({a['problem']}, {b['problem']}): their times are not "
                   "comparable, and each speedup is over its own problem's baseline")
    if a["device"] != b["device"]:
        out.append(f"A and B ran on different devices ({a['device']}, {b['device']}): their times are each the "
                   "device's")
    return out


def _headline(report: dict) -> dict:
    run, p, c = report["run"], report["problems"][0], report["counts"]
    return {"problem": run["problem"], "strategy": run["strategy"], "proposer": run["proposer"],
            "device": run["device"], "status": run["status"], "best_ms": p["runtime_ms"],
            "speedup_eager": p["speedup_eager"], "speedup_compile": p["speedup_compile"],
            "candidates": c["candidates"], "correct": c["by_status"].get("ok", 0), "rounds": run["rounds"],
            "calls": c["calls"], "tokens": c["input_tokens"] + c["output_tokens"], "cost": c["cost"],
            "wall_seconds": run["wall_seconds"]}
