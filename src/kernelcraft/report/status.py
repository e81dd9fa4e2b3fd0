"""A run as an agent follows it (the MCP server, the API): where it stands, its best kernel with the feedback a
proposer gets for it, and its report cut to a line per candidate. Built from the store's records through the
ledger, the one view of a run the search's outcome and the reports share."""

from __future__ import annotations

from kernelcraft.errors import KernelcraftError
from kernelcraft.ledger import best_row, run_error, stored_counts
from kernelcraft.propose.feedback import brief, render
from kernelcraft.store import Store

# What each candidate of a compact report keeps (its verdict in a line is added).
COMPACT_CANDIDATE = ("id", "key", "round", "backend", "status", "correct", "runtime_ms", "speedup_eager",
                     "speedup_compile", "idea", "category", "paid_off")


def run_status(store: Store, ident: str) -> dict:
    """A run's state: status, round, candidates evaluated by status, its budget, the best kernel so far."""
    row = store.run(ident)
    rows = store.candidates(row.id)
    counts = stored_counts(store, row.id, rows)
    best, final = best_row(row, rows)
    config = row.spec.run
    return {"run_id": row.id, "problem": row.problem, "status": row.status, "stop_reason": row.stop_reason,
            "strategy": row.strategy, "proposer": row.proposer, "device": row.device,
            "round": max((c.round for c in rows), default=0), "rounds": config.rounds,
            "candidates": len(rows), "candidates_evaluated": counts["evaluated"], "by_status": counts["by_status"],
            "max_candidates": config.budget.candidates,
            "seconds": round(row.updated - row.created, 1) if not row.running else None,
            "best": None if best is None else {
                "candidate": best.id, "key": best.key, "round": best.round, "backend": best.backend,
                "runtime_ms": best.runtime_ms, "speedup_eager": best.speedup_eager,
                "speedup_compile": best.speedup_compile, "final": final},
            "error": run_error(row)}


def best_kernel(store: Store, ident: str) -> dict:
    """A run's best verified kernel: its source, figures and feedback; a KernelcraftError where it has none yet."""
    row = store.run(ident)
    best, final = best_row(row, store.candidates(row.id))
    if best is None:
        state = "is still running and has" if row.running else f"ended ({row.status}) with"
        raise KernelcraftError(f"run {row.id} {state} no correct kernel yet; run_status shows what was tried"
                               + ("; call again later" if row.running else ""))
    result = store.result(best.id)
    return {"run_id": row.id, "problem": row.problem, "run_status": row.status, "final": final,
            "candidate": best.id, "key": best.key, "round": best.round, "backend": best.backend,
            "idea": best.idea, "category": best.category, "runtime_ms": result.runtime_ms,
            "eager_ms": result.eager_ms, "compile_ms": result.compile_ms, "speedup_eager": result.speedup_eager,
            "speedup_compile": result.speedup_compile, "max_rel_error": result.max_rel_error,
            "device": result.device, "policy": result.policy,
            "source": best.source, "feedback": render(result, profile=store.profile(best.id))}


def compact(store: Store, report: dict) -> dict:
    """A run's report (report/data.py) cut for an agent: one short line per candidate (its verdict in a line), no
    sources; any other report as it is."""
    if report.get("kind") != "run":
        return report
    results = store.results(report["run"]["run_id"])
    cands = [{k: c.get(k) for k in COMPACT_CANDIDATE} | {"verdict": brief(results.get(c["id"]), c["parse_error"])}
             for c in report["candidates"]]
    best = dict(report["best"] or {})
    best.pop("source", None)
    return {**{k: v for k, v in report.items() if k not in ("candidates", "best", "payoff_definition")},
            "best": best or None, "candidates": cands}
