"""Which regions to optimize and for how long: the biggest share of the model's time first, the time budget split
in proportion to the shares (Amdahl: a region's best possible gain is bounded by its share) above a floor per
region (where the budget cannot give every region its floor, the smallest shares go without), and what the end
to end speedup can be at most."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.apply.profile import Profile

MIN_SHARE = 0.02  # a region under this share of the model's time is left as it is
MIN_MINUTES = 0.5  # a region's run gets at least this much of a budget (less verifies hardly one kernel)
IDLE_KINDS = ("layout",)  # regions that only reshape or copy


@dataclass
class RegionPlan:
    name: str
    kind: str
    ms: float  # its standalone time (profile)
    share: float
    minutes: float | None  # its part of the time budget (None: no budget, the run's own limits)
    optimize: bool
    why: str = ""  # why it is left as it is

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def plan(profile: Profile, budget_minutes: float | None = None, min_share: float = MIN_SHARE,
         unable: dict[str, str] | None = None) -> list[RegionPlan]:
    """The regions in the order to optimize them (the largest share first), each with its budget. `unable`: the
    regions the proposer cannot write kernels for, and why (they take no budget)."""
    unable = unable or {}
    plans = []
    for r in profile.regions:
        why = ("it only reshapes or copies" if r.kind in IDLE_KINDS else
               f"{r.share:.1%} of the model's time, under {min_share:.0%}" if r.share < min_share else
               unable.get(r.name, ""))
        plans.append(RegionPlan(r.name, r.kind, r.ms, r.share, None, not why, why))
    chosen = sorted((p for p in plans if p.optimize), key=lambda p: -p.share)
    if budget_minutes is not None and chosen:
        # every region funded gets the floor, the rest of the budget split by share; where the budget cannot
        # give each region its floor, the largest shares are funded and the smallest go without
        funded = chosen[:max(1, min(len(chosen), int(budget_minutes / MIN_MINUTES + 1e-9)))]
        extra = max(budget_minutes - MIN_MINUTES * len(funded), 0.0)
        total = sum(p.share for p in funded) or 1.0
        for p in chosen:
            if p in funded:
                p.minutes = min(MIN_MINUTES, budget_minutes) + extra * p.share / total
            else:
                p.optimize, p.why = False, (f"the budget ({budget_minutes:g} min) ran out: each region's run "
                                            f"takes at least {MIN_MINUTES:g} min")
    return [p for p in chosen if p.optimize] + [p for p in plans if not p.optimize]


def amdahl(shares: dict[str, float], speedups: dict[str, float]) -> float:
    """The model's speedup when each region of `speedups` runs that much faster and the rest as it was (shares:
    of the model's time, by region). With every optimized region infinitely fast, the bound Amdahl allows."""
    rest = 1.0 - sum(shares[n] for n in speedups)
    new = max(rest, 0.0) + sum(shares[n] / s for n, s in speedups.items() if s > 0)
    return 1.0 / new if new > 0 else float("inf")
