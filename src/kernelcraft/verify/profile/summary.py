"""What Nsight Compute's counters say about one call, ranked and in words: per kernel, its share of the
device time; for the top kernels, DRAM and SM throughput against peak, occupancy (achieved, theoretical
and what limits it), the top warp-stall reasons, the L2 hit rate, shared-memory bank conflicts, and a
one-line verdict.

A *kernel* is one function: its launches in the call are taken together (times summed; percentages and
ratios weighted by each launch's time; counts summed). The verdict names the first of these that holds:
bank-conflicted (a fifth or more of the shared-memory wavefronts are conflicts), memory-bound (DRAM at 60%
of peak or more; "near peak" from 75%), compute-bound (SM at 60% or more), bound by on-chip memory (the
busiest of L1/shared, L2 and DRAM at 60% or more while DRAM is not), else latency-bound (no unit busy:
the top stall and occupancy say why).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from kernelcraft.verify.profile.ncu import KernelCounters

TOP = 3  # kernels described in full; stall reasons named per kernel
BUSY = 60.0  # % of peak at which a unit bounds a kernel
NEAR_PEAK = 75.0  # % of DRAM peak called "near peak"
CONFLICTED = 0.2  # share of shared-memory wavefronts that are bank conflicts
LOW_OCCUPANCY = 40.0  # achieved occupancy (%) worth naming in a latency-bound verdict

_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
# ncu's stall reasons in plain words (its Profiling Guide, "Warp Scheduler States").
STALLS = {
    "barrier": "waiting at a barrier (__syncthreads) for sibling warps",
    "branch_resolving": "waiting for a branch target to resolve",
    "dispatch_stall": "the dispatcher could not issue (pipeline conflict)",
    "drain": "draining memory stores after EXIT",
    "gmma": "waiting on warpgroup MMA (wgmma)",
    "imc_miss": "immediate-constant cache miss",
    "lg_throttle": "global/local memory queue full (too many memory instructions)",
    "long_scoreboard": "waiting on global or local memory (L1TEX) data",
    "math_pipe_throttle": "a math pipe was busy",
    "membar": "waiting at a memory barrier (fence)",
    "mio_throttle": "MIO queue full (shared memory, special math, branches)",
    "misc": "miscellaneous",
    "no_instruction": "no instruction ready (instruction cache miss)",
    "not_selected": "eligible, but another warp was issued",
    "short_scoreboard": "waiting on shared-memory or special-math results",
    "sleeping": "sleeping (nanosleep)",
    "tex_throttle": "texture/TMA queue full",
    "wait": "a fixed-latency dependency",
}
LIMITS = {"registers": "launch__occupancy_limit_registers", "shared memory": "launch__occupancy_limit_shared_mem",
          "warps": "launch__occupancy_limit_warps", "blocks": "launch__occupancy_limit_blocks"}
_SUMMED = ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
           "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
           "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", "dram__bytes_read.sum", "dram__bytes_write.sum")


@dataclass
class Stall:
    reason: str  # ncu's name, e.g. long_scoreboard
    words: str
    share: float  # of the cycles between two issued instructions, 0..1


@dataclass
class KernelSummary:
    name: str  # as ncu names it (demangled)
    short: str  # its function name, templates and parameters left out
    custom: bool  # declared by the candidate (False: a library kernel, or the reference's)
    launches: int
    time_us: float
    share: float  # of the call's kernel time, 0..1
    dram_pct: float | None = None
    dram_gbps: float | None = None
    sm_pct: float | None = None
    memory_pct: float | None = None  # the busiest memory unit (L1/shared, L2, DRAM)
    l2_hit_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    blocks_per_sm: int | None = None
    limiters: list[str] = field(default_factory=list)  # what caps blocks per SM (ties: all)
    registers: int | None = None
    block_size: int | None = None
    grid_size: int | None = None
    stalls: list[Stall] = field(default_factory=list)
    smem_wavefronts: float | None = None
    smem_conflicts: float | None = None
    verdict_kind: str = ""  # bank_conflicted | memory_bound | compute_bound | onchip_bound | latency_bound
    verdict: str = ""

    @property
    def conflict_ratio(self) -> float | None:
        """Bank conflicts over shared-memory wavefronts (None: no shared-memory traffic)."""
        if not self.smem_wavefronts:
            return None
        return (self.smem_conflicts or 0.0) / self.smem_wavefronts

    @property
    def conflict_ways(self) -> float | None:
        """Wavefronts per conflict-free wavefront: ~32 for a 32-way conflict, 1 for none."""
        if not self.smem_wavefronts:
            return None
        ideal = self.smem_wavefronts - (self.smem_conflicts or 0.0)
        return self.smem_wavefronts / ideal if ideal > 0 else None

    def to_dict(self) -> dict:
        return asdict(self) | {"conflict_ratio": self.conflict_ratio, "conflict_ways": self.conflict_ways}

    @classmethod
    def from_dict(cls, data: dict) -> "KernelSummary":
        data = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        data["stalls"] = [Stall(**s) for s in data.get("stalls") or []]
        return cls(**data)


@dataclass
class Profile:
    """One call of a candidate (or the reference) under Nsight Compute, summarised."""

    target: str  # candidate | reference
    name: str  # the candidate's name, or the problem's for the reference
    problem: str
    device: str
    ncu: str  # ncu's version
    kernels: list[KernelSummary]  # by time, largest first
    total_us: float  # kernel time of the call as ncu measured it (each kernel replayed, caches flushed)

    def to_dict(self) -> dict:
        return {"target": self.target, "name": self.name, "problem": self.problem, "device": self.device,
                "ncu": self.ncu, "total_us": self.total_us, "kernels": [k.to_dict() for k in self.kernels],
                "summary": render(self)}

    @classmethod
    def from_dict(cls, data: dict) -> "Profile":
        return cls(data["target"], data["name"], data["problem"], data["device"], data["ncu"],
                   [KernelSummary.from_dict(k) for k in data["kernels"]], data["total_us"])


def short_name(name: str) -> str:
    """`void at::<unnamed>::cunn_SoftMaxForward<4, float>(T4 *, int)` -> `at::cunn_SoftMaxForward`: the
    qualified name up to its template arguments or parameters (ncu's demangled names of lambdas inside
    template arguments do not even balance their brackets, so nothing after the first is read)."""
    text = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    text = re.sub(r"^(?:void|static|__global__)\s+", "", text.strip())
    text = re.split(r"[<(]", text, maxsplit=1)[0].strip()
    return text or name


def summarize(launches: list[KernelCounters], declared: set[str] = frozenset(), target: str = "candidate",
              name: str = "", problem: str = "", ncu: str = "") -> Profile:
    """The call's profile: its launches grouped by kernel function, ranked by time."""
    from kernelcraft.verify.attribution import is_custom

    groups: dict[str, list[KernelCounters]] = {}
    for k in launches:
        groups.setdefault(k.name, []).append(k)
    total_ns = sum(_time_ns(k) for k in launches) or 1.0
    kernels = [summarize_kernel(group, total_ns, is_custom(kname, set(declared)) if declared else False)
               for kname, group in groups.items()]
    kernels.sort(key=lambda k: -k.time_us)
    device = next((k.device for k in launches if k.device), "")
    return Profile(target, name, problem, device, ncu, kernels, round(total_ns / 1e3, 3))


def _time_ns(k: KernelCounters) -> float:
    return k.number("gpu__time_duration.sum") or 0.0


def summarize_kernel(launches: list[KernelCounters], total_ns: float, custom: bool = False) -> KernelSummary:
    """One kernel function over its launches (one or more rows of the raw page)."""
    times = [_time_ns(k) for k in launches]
    time_ns = sum(times)
    weights = [t / time_ns for t in times] if time_ns else [1.0 / len(launches)] * len(launches)
    longest = launches[max(range(len(launches)), key=lambda i: times[i])]

    def mean(metric: str) -> float | None:
        pairs = [(w, k.number(metric)) for w, k in zip(weights, launches) if k.number(metric) is not None]
        weight = sum(w for w, _ in pairs)
        return sum(w * v for w, v in pairs) / weight if pairs and weight else None

    def total(metric: str) -> float | None:
        values = [k.number(metric) for k in launches if k.number(metric) is not None]
        return sum(values) if values else None

    def whole(metric: str) -> int | None:
        value = longest.number(metric)
        return int(value) if value is not None else None

    s = KernelSummary(longest.name, short_name(longest.name), custom, len(launches), round(time_ns / 1e3, 3),
                      time_ns / total_ns if total_ns else 0.0)
    s.dram_pct = mean("dram__throughput.avg.pct_of_peak_sustained_elapsed")
    rate = mean("dram__bytes.sum.per_second")
    s.dram_gbps = rate / 1e9 if rate is not None else None
    s.sm_pct = mean("sm__throughput.avg.pct_of_peak_sustained_elapsed")
    s.memory_pct = mean("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
    s.l2_hit_pct = mean("lts__t_sector_hit_rate.pct")
    s.achieved_occupancy_pct = mean("sm__warps_active.avg.pct_of_peak_sustained_active")
    s.theoretical_occupancy_pct = longest.number("sm__maximum_warps_per_active_cycle_pct")
    limits = {label: longest.number(metric) for label, metric in LIMITS.items() if longest.number(metric) is not None}
    if limits:
        s.blocks_per_sm = int(min(limits.values()))
        s.limiters = [label for label, v in limits.items() if v == s.blocks_per_sm]
    s.registers, s.block_size, s.grid_size = (whole("launch__registers_per_thread"), whole("launch__block_size"),
                                              whole("launch__grid_size"))
    s.stalls = _stalls(launches, weights)
    sums = {m: total(m) for m in _SUMMED}
    wavefronts = [sums[m] for m in _SUMMED[2:4] if sums[m] is not None]
    conflicts = [sums[m] for m in _SUMMED[0:2] if sums[m] is not None]
    s.smem_wavefronts = sum(wavefronts) if wavefronts else None
    s.smem_conflicts = sum(conflicts) if conflicts else None
    s.verdict_kind, s.verdict = verdict(s, longest.number("launch__waves_per_multiprocessor"))
    return s


def _stalls(launches: list[KernelCounters], weights: list[float]) -> list[Stall]:
    """The top stall reasons, each as its share of all stall cycles between two issued instructions
    (`selected`, the cycle a warp issues, counts in the whole but is no stall)."""
    ratios: dict[str, float] = {}
    for w, k in zip(weights, launches):
        for metric, value in k.values.items():
            m = _STALL.match(metric)
            if m and isinstance(value, float):
                ratios[m.group(1)] = ratios.get(m.group(1), 0.0) + w * value
    whole = sum(ratios.values())
    if not whole:
        return []
    ranked = sorted(((r, v) for r, v in ratios.items() if r != "selected" and v > 0), key=lambda rv: -rv[1])
    return [Stall(r, STALLS.get(r, r.replace("_", " ")), v / whole) for r, v in ranked[:TOP]]


def verdict(s: KernelSummary, waves: float | None = None) -> tuple[str, str]:
    """(kind, one line) for a kernel: what bounds it, by the order in the module's docstring."""
    dram, sm, busiest = s.dram_pct or 0.0, s.sm_pct or 0.0, s.memory_pct or 0.0
    ratio = s.conflict_ratio
    if ratio is not None and ratio >= CONFLICTED:
        ways = s.conflict_ways
        return "bank_conflicted", (f"bank-conflicted: {100 * ratio:.0f}% of shared-memory wavefronts are bank "
                                   f"conflicts" + (f" (~{ways:.0f}-way)" if ways and ways >= 1.5 else ""))
    if dram >= BUSY:
        near = " near peak" if dram >= NEAR_PEAK else ""
        gbps = f", {s.dram_gbps:.0f} GB/s" if s.dram_gbps else ""
        return "memory_bound", f"memory-bound{near}: DRAM at {dram:.0f}% of peak{gbps}"
    if sm >= BUSY:
        return "compute_bound", f"compute-bound: SM throughput at {sm:.0f}% of peak (DRAM {dram:.0f}%)"
    if busiest >= BUSY:
        return "onchip_bound", (f"bound by on-chip memory (L1/shared or L2 at {busiest:.0f}% of peak) while DRAM "
                                f"is at {dram:.0f}%")
    why = []
    if s.stalls:
        why.append(f"warps mostly {s.stalls[0].words}")
    occupancy = s.achieved_occupancy_pct
    if occupancy is not None and occupancy < LOW_OCCUPANCY:
        limit = f", limited by {' and '.join(s.limiters)}" if s.limiters and (s.theoretical_occupancy_pct or 100) < 100 else ""
        why.append(f"low occupancy ({occupancy:.0f}%{limit})")
    if waves is not None and waves < 1:
        why.append(f"the grid fills {100 * waves:.0f}% of one wave of the SMs")
    return "latency_bound", (f"latency-bound: no unit is busy (DRAM {dram:.0f}%, SM {sm:.0f}% of peak)"
                             + ("; " + "; ".join(why) if why else ""))


# -- in words ------------------------------------------------------------------------------------------

def _pct(value: float | None, digits: int = 0) -> str:
    return "?" if value is None else f"{value:.{digits}f}%"


def kernel_lines(k: KernelSummary, rank: int) -> list[str]:
    """Two or three lines for one kernel: its share and verdict, then its figures, then its stalls."""
    who = "" if not k.custom else " (yours)"
    calls = f" x{k.launches}" if k.launches > 1 else ""
    head = f"{rank}. {k.short[:80]}{who}{calls}: {100 * k.share:.1f}% of the time ({k.time_us / 1e3:.3f} ms) — {k.verdict}"
    figures = [f"DRAM {_pct(k.dram_pct, 1)} of peak" + (f" ({k.dram_gbps:.0f} GB/s)" if k.dram_gbps is not None else ""),
               f"SM {_pct(k.sm_pct, 1)}"]
    if k.memory_pct is not None:
        figures.append(f"busiest memory unit {_pct(k.memory_pct, 1)}")
    if k.l2_hit_pct is not None:
        figures.append(f"L2 hit {_pct(k.l2_hit_pct)}")
    if k.achieved_occupancy_pct is not None:
        occ = f"occupancy {_pct(k.achieved_occupancy_pct)} of {_pct(k.theoretical_occupancy_pct)} theoretical"
        if k.blocks_per_sm is not None:  # the limiter matters only where it holds occupancy under 100%
            limited = (k.theoretical_occupancy_pct or 100.0) < 100.0 and k.limiters
            occ += f" ({k.blocks_per_sm} blocks/SM" + (f", limited by {' and '.join(k.limiters)})" if limited else ")")
        figures.append(occ)
    ratio = k.conflict_ratio
    if ratio is not None:
        figures.append(f"shared-memory bank conflicts {100 * ratio:.0f}% of wavefronts")
    lines = [head, "   " + " · ".join(figures)]
    if k.stalls:
        lines.append("   stalls: " + "; ".join(f"{s.words} {100 * s.share:.0f}%" for s in k.stalls))
    return lines


def render(p: Profile) -> str:
    """The profile in a few lines, top kernels first: for feedback, terminals and reports."""
    count = len(p.kernels)
    head = (f"Nsight Compute, one call of the {p.target}: {count} kernel{'' if count == 1 else 's'}, "
            f"{p.total_us / 1e3:.3f} ms of kernel time" + (f" on {p.device}" if p.device else ""))
    lines = [head]
    for i, k in enumerate(p.kernels[:TOP], 1):
        lines += kernel_lines(k, i)
    rest = p.kernels[TOP:]
    if rest:
        lines.append(f"… {len(rest)} more kernel{'' if len(rest) == 1 else 's'}, "
                     f"{100 * sum(k.share for k in rest):.1f}% of the time")
    return "\n".join(lines)
