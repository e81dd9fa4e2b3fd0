"""The numbers a benchmark is judged by: KernelBench's fast_p and the geometric mean speedup; and how a speedup
is written (`times`)."""

from __future__ import annotations

import math

P_VALUES = (0.0, 1.0, 1.5, 2.0)


def times(speedup: float) -> str:
    """A speedup as "1.32x"; a tiny one keeps two significant digits ("0.00055x", not "0.00x")."""
    return f"{speedup:.2f}x" if speedup >= 0.1 else f"{speedup:.2g}x"


def fast_p(speedups: list[float | None], p: float) -> float:
    """The fraction of problems whose kernel is correct and more than p times faster than the
    baseline. `speedups` has one entry per problem: None where no correct kernel was found."""
    if not speedups:
        return 0.0
    return sum(1 for s in speedups if s is not None and s > p) / len(speedups)


def geomean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def bench_metrics(rows: list[dict]) -> dict:
    """`rows`: one per problem with `speedup_eager` and `speedup_compile` (None when not correct)."""
    out = {"problems": len(rows), "correct": sum(1 for r in rows if r.get("correct"))}
    for base in ("eager", "compile"):
        speedups = [r.get(f"speedup_{base}") if r.get("correct") else None for r in rows]
        out[f"fast_p_{base}"] = {f"{p:g}": fast_p(speedups, p) for p in P_VALUES}
        out[f"geomean_{base}"] = geomean(speedups)
    return out
