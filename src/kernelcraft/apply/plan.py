"""Which regions to optimize and for how long: the biggest share of the model's time first, the time budget split
in proportion to the shares (Amdahl: a region's best possible gain is bounded by its share) above a floor per
region (where the budget cannot give every region its floor, the smallest shares go without), and what the end
to end speedup can be at most. Regions that are one problem (instances.py) are planned once, as the first of
them, at their summed share; the others follow it. The split is made again as each run starts (`fund`), over
what is left of the budget and the regions not yet run: a run that ends early (its proposer out of moves) leaves
its time to the next, and a region the first split left out gets a run where time is left for it."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelcraft.apply.profile import Profile

MIN_SHARE = 0.02  # a region under this share of the model's time is left as it is
MIN_MINUTES = 1.0  # a region's run gets at least this much of a budget: at full sizes on an H200 a region's
# baselines took 12-17 s and a candidate's verdict about 20 s; three runs of four given 0.5 min verified nothing
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
    instances: list[str] = field(default_factory=list)  # the regions it stands for, itself first ([] : itself only)
    like: str = ""  # the region whose problem this one is, planned in its place ("": itself)
    worth: bool = False  # worth a run (its share, covered, not idle), funded or not

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def plan(profile: Profile, budget_minutes: float | None = None, min_share: float = MIN_SHARE,
         unable: dict[str, str] | None = None, like: dict[str, str] | None = None) -> list[RegionPlan]:
    """The regions in the order to optimize them (the largest share first), each with its budget. `unable`: the
    regions the proposer cannot write kernels for, and why (they take no budget). `like`: each region's name ->
    the first region of its problem (instances.instances); the first stands for all, at their summed share."""
    unable, like = unable or {}, like or {}
    members: dict[str, list[str]] = {}
    shares: dict[str, float] = {}
    for r in profile.regions:
        first = like.get(r.name, r.name)
        members.setdefault(first, []).append(r.name)
        shares[first] = shares.get(first, 0.0) + r.share
    plans = []
    for r in profile.regions:
        first = like.get(r.name, r.name)
        if first != r.name:
            plans.append(RegionPlan(r.name, r.kind, r.ms, r.share, None, False,
                                    f"the same problem as {first}: its kernel, where it has one", like=first))
            continue
        share = shares[first]
        why = ("it only reshapes or copies" if r.kind in IDLE_KINDS else
               f"{share:.1%} of the model's time, under {min_share:.0%}" if share < min_share else
               unable.get(r.name, ""))
        group = members[first] if len(members[first]) > 1 else []
        plans.append(RegionPlan(r.name, r.kind, r.ms, share, None, not why, why, instances=group, worth=not why))
    chosen = sorted((p for p in plans if p.worth), key=lambda p: -p.share)
    if budget_minutes is not None:
        fund(chosen, budget_minutes)
    return chosen + [p for p in plans if not p.worth]


def fund(chosen: list[RegionPlan], budget_minutes: float) -> None:
    """Split `budget_minutes` among `chosen` (worth a run, the largest share first): every region funded gets the
    floor and the rest of the budget by share; where the budget cannot give each its floor, the largest shares
    are funded and the smallest go without (`optimize` False, and why)."""
    funded = chosen[:max(1, min(len(chosen), int(budget_minutes / MIN_MINUTES + 1e-9)))]
    extra = max(budget_minutes - MIN_MINUTES * len(funded), 0.0)
    total = sum(p.share for p in funded) or 1.0
    for p in chosen:
        if p in funded:
            p.optimize, p.why = True, ""
            p.minutes = min(MIN_MINUTES, budget_minutes) + extra * p.share / total
        else:
            p.optimize, p.minutes = False, None
            p.why = (f"the runs' budget ({budget_minutes:.2g} min) ran out: each region's run takes at least "
                     f"{MIN_MINUTES:g} min")


def amdahl(shares: dict[str, float], speedups: dict[str, float]) -> float:
    """The model's speedup when each region of `speedups` runs that much faster and the rest as it was (shares:
    of the model's time, by region). With every optimized region infinitely fast, the bound Amdahl allows."""
    rest = 1.0 - sum(shares[n] for n in speedups)
    new = max(rest, 0.0) + sum(shares[n] / s for n, s in speedups.items() if s > 0)
    return 1.0 / new if new > 0 else float("inf")
