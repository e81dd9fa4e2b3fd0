"""Which runs an export reads (run ids, prefixes, bench ids) and which rows it keeps (the filters)."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.errors import KernelcraftError
from kernelcraft.ranking import clearly_faster
from kernelcraft.result import STATUSES as RESULT_STATUSES
from kernelcraft.records import UNEVALUATED, RunRecord
from kernelcraft.store import Store

KINDS = ("sft", "rl", "trajectories")
# A candidate's status: the verifier's, or why it has none (its call failed; no evaluable kernel in the answer;
# not evaluated, e.g. a run stopped on its wall-time budget before the verifier got to it).
STATUSES = RESULT_STATUSES + UNEVALUATED
BASELINES = ("eager", "compile")


class ExportError(KernelcraftError):
    """An export that cannot be made as asked (a filter that makes no sense for the kind, an existing file)."""


@dataclass
class Filters:
    correct_only: bool = False
    min_speedup: float | None = None  # against `baseline`; implies correct
    baseline: str = "eager"
    statuses: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    model: str | None = None  # the run's proposer: "openai/o3", or just "o3", or "builtin"

    def check(self, kind: str) -> None:
        """Raise ExportError when a filter is unknown or means nothing for `kind`."""
        if kind not in KINDS:
            raise ExportError(f"unknown kind {kind!r}; choose from {', '.join(KINDS)}")
        if self.baseline not in BASELINES:
            raise ExportError(f"--baseline {self.baseline}: choose eager or compile")
        unknown = [s for s in self.statuses if s not in STATUSES]
        if unknown:
            raise ExportError(f"--status {unknown[0]}: unknown; choose from {', '.join(STATUSES)}")
        if self.min_speedup is not None and self.min_speedup < 0:
            raise ExportError(f"--min-speedup must not be negative, got {self.min_speedup}")
        if kind == "rl":
            given = [flag for flag, value in (("--correct-only", self.correct_only),
                                              ("--min-speedup", self.min_speedup is not None),
                                              ("--status", self.statuses), ("--category", self.categories),
                                              ("--baseline", self.baseline != "eager")) if value]
            if given:
                raise ExportError(f"{given[0]} selects candidates; rl rows are problems (only --model applies)")
        if kind == "sft" and self.statuses:
            raise ExportError("--status: sft rows are correct candidates (status ok) by definition; "
                              "use --kind trajectories to select by status")

    def keeps_run(self, run: RunRecord) -> bool:
        if not self.model:
            return True
        name = run.proposer
        return name == self.model or name.split("/", 1)[-1] == self.model

    def speedup(self, row: dict) -> float | None:
        return row["speedup_eager"] if self.baseline == "eager" else row["speedup_compile"]

    def beats_baseline(self, row: dict) -> bool:
        """The kernel's time is below the baseline's beyond their spread (IQRs as run_steps records them)."""
        base = f"{self.baseline}_ms"
        if row.get("runtime_ms") is None or row.get(base) is None:
            return True  # no baseline time stored: the stored speedup is all there is to go on
        return clearly_faster((row["runtime_ms"], row.get("_runtime_iqr_ms")),
                              (row[base], row.get(f"_{self.baseline}_iqr_ms")))

    def keeps(self, row: dict, kind: str) -> bool:
        """Whether a candidate row (sft or trajectories) passes. sft rows are correct and faster than the
        baseline beyond the spread of the two timings (ranking.py; a speedup of 1.02 inside the
        noise is not faster), or at least --min-speedup times faster when it is given."""
        if (self.correct_only or kind == "sft" or self.min_speedup is not None) and not row["correct"]:
            return False
        speedup = self.speedup(row)
        if self.min_speedup is not None and (speedup is None or speedup < self.min_speedup):
            return False
        if kind == "sft" and self.min_speedup is None and (speedup is None or speedup <= 1.0
                                                           or not self.beats_baseline(row)):
            return False
        if self.statuses and row.get("status") not in self.statuses:
            return False
        if self.categories and row["category"] not in self.categories:
            return False
        return True

    def to_dict(self) -> dict:
        """The filters that were set (for the summary)."""
        out = {"correct_only": self.correct_only or None, "min_speedup": self.min_speedup,
               "baseline": self.baseline if self.baseline != "eager" or self.min_speedup is not None else None,
               "status": list(self.statuses) or None, "category": list(self.categories) or None,
               "model": self.model}
        return {k: v for k, v in out.items() if v is not None}


def resolve_runs(store: Store, refs: list[str]) -> list[RunRecord]:
    """The runs named by `refs`: each a bench id or an apply id (all its runs) or a run id, or a unique prefix of
    one (as `kernelcraft report` reads them). Raises StoreError for a name that matches nothing, or more than one."""
    from kernelcraft.ledger import resolve

    runs: dict[str, RunRecord] = {}
    for ref in refs:
        kind, ident = resolve(store, ref)
        found = (store.runs(bench_id=ident) if kind == "bench" else store.runs(apply_id=ident) if kind == "apply"
                 else [store.run(ident)])
        for run in found:
            runs.setdefault(run.id, run)
    return list(runs.values())
