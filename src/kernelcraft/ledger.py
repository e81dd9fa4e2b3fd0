"""A run store read back the way the search, the reports and the exports all read it: which run or bench a
name means, a run's trajectory (the best kernel so far, round by round) and its counts. It sits on the floor
of the store itself, so none of the three borrows another's shapes.

The best kernel at a round is the fastest correct candidate up to that round, where faster means beyond the
measured spread (ranking.py): candidates are taken by round, then key, and a later one displaces the best
only when its median time is below the best's by more than half the sum of their IQRs."""

from __future__ import annotations

from kernelcraft.ranking import clearly_faster
from kernelcraft.records import FAILING, REFUSED, CandidateRecord, RunRecord, unevaluated_status
from kernelcraft.store import Store, StoreError


def resolve(store: Store, ident: str) -> tuple[str, str]:
    """("bench", id), ("apply", id) or ("run", id) for a bench, apply or run id, or a unique prefix of one."""
    if ident.startswith("apply-"):
        return "apply", store.apply(ident).id
    benches = store.benches(ident)
    if len(benches) == 1 or any(b.id == ident for b in benches):
        return "bench", next((b.id for b in benches if b.id == ident), benches[0].id)
    if len(benches) > 1:
        raise StoreError(f"bench {ident!r} is ambiguous: {', '.join(b.id for b in benches[:5])}")
    return "run", store.run(ident).id


def trajectory(rows: list[CandidateRecord]) -> list[dict]:
    """Per round: candidates tried, how many were correct, and the best kernel so far.

    `rows` are `Store.candidates(run_id)`."""
    out, best = [], None
    for r in sorted({c.round for c in rows}):
        this = [c for c in rows if c.round == r]
        correct = [c for c in this if c.correct]
        for c in sorted(correct, key=lambda c: c.key):  # a later kernel wins only beyond the spread
            if best is None or clearly_faster(c.spread, best.spread):
                best = c
        out.append({"round": r, "candidates": len(this), "correct": len(correct),
                    "best_runtime_ms": best.runtime_ms if best else None,
                    "best_speedup_eager": best.speedup_eager if best else None,
                    "best_speedup_compile": best.speedup_compile if best else None,
                    "best_key": best.key if best else None, "best_idea": best.idea if best else None,
                    "best_category": best.category if best else None})
    return out


def stored_counts(store: Store, run_id: str, rows: list[CandidateRecord]) -> dict:
    """A run's counts, from the store: calls, tokens, cost, candidates by status. `rows`: its candidates."""
    usage = store.usage(run_id)
    by_status: dict[str, int] = {}
    for r in rows:
        by_status[r.state] = by_status.get(r.state, 0) + 1
    return {"calls": usage.calls, "failed_calls": usage.failed or 0, "last_error": usage.last_error,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens, "cost": usage.cost or 0.0,
            "unpriced_calls": usage.unpriced or 0, "candidates": len(rows),
            "evaluated": sum(1 for r in rows if r.evaluated),
            "malformed": sum(1 for r in rows if unevaluated_status(r.parse_error) == "malformed"),
            "by_status": by_status}


def run_error(row: RunRecord) -> str | None:
    """What to tell the user, in one line, of a run stopped because its proposer could not answer (its stop reason
    holds the proposer's error); None for any other end."""
    code, _, detail = (row.stop_reason or "").partition(": ")
    if code == REFUSED:
        return f"{detail}; the model endpoint refused the request, so the run stopped"
    if code == FAILING:
        stop_after = row.spec.run.stop_after_failures
        failed = f"{stop_after} calls in a row failed" if stop_after else "its calls kept failing"
        return (f"{detail}; {failed}, so the run stopped "
                f"(`kernelcraft run --resume {row.id}` goes on once the endpoint answers)")
    return None


def best_row(run: RunRecord, rows: list[CandidateRecord]) -> tuple[CandidateRecord | None, bool]:
    """A run's best candidate (a `rows` entry, None if none is correct) and whether it is final: the one stored
    when the run ended, or, while it goes on, the best so far by the same rule (the trajectory's last best)."""
    if run.best_candidate is not None:
        return next((c for c in rows if c.id == run.best_candidate), None), True
    traj = trajectory(rows)
    key = traj[-1]["best_key"] if traj else None
    return next((c for c in rows if c.key == key), None), not run.running
