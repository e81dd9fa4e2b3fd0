"""Ranking kernels by time when "faster" means beyond the measured spread (`faster_beyond_spread`).

That relation is not a total order (A may not beat B, B not beat C, yet C beat A), so a ranking is a
succession of champions: candidates are taken in a fixed order (round, then key: never arrival), the
first is the incumbent, and a later one displaces it only when clearly faster. Ties, and differences
inside the spread, keep the earlier candidate. The next place is the champion of those left.

A candidate is anything; `spread` says its (cost_ms, iqr_ms) (`Timing.cost_ms`), or None when it has no time to
rank (not correct, not timed): those never rank.
"""

from __future__ import annotations

from typing import Callable, Iterable, TypeVar

from kernelcraft.result import faster_beyond_spread

T = TypeVar("T")
Spread = tuple[float, float | None]  # (cost_ms, iqr_ms)


def clearly_faster(a: Spread | None, b: Spread | None) -> bool:
    """`a` faster than `b` beyond their spread; a time beats no time, no time beats nothing."""
    if a is None:
        return False
    return b is None or faster_beyond_spread(a[0], a[1], b[0], b[1])


def champion(items: Iterable[T], spread: Callable[[T], Spread | None]) -> T | None:
    """The best of `items`, which must come in their fixed order (earlier first)."""
    best, best_spread = None, None
    for item in items:
        s = spread(item)
        if s is not None and (best is None or clearly_faster(s, best_spread)):
            best, best_spread = item, s
    return best


def ranked(items: Iterable[T], spread: Callable[[T], Spread | None], n: int | None = None) -> list[T]:
    """The first `n` (all when None) places: the champion, then the champion of the rest, and so on."""
    left = [item for item in items if spread(item) is not None]
    out: list[T] = []
    while left and (n is None or len(out) < n):
        best = champion(left, spread)
        out.append(best)
        left = [item for item in left if item is not best]
    return out
