"""`--budget-minutes` as a user reads it: the wall time of the whole apply (capture, profile, the model's baselines,
the regions' runs, the end-to-end verification), not of the regions' runs alone. The runs get what is left after
the model's own measurements, less a reserve for the end-to-end verdict; what is left is split again among the
regions not yet run as each run starts (plan.fund), and a run ends at its deadline with its queued evaluations
withdrawn (search/engine.py).

The reserve is at least a fifth of the budget, and at least twice what the model's own baselines took to measure
(`expect_model_verdict`): a verdict of the model with its kernels starts a worker, loads and compiles the model and
times it, as the baselines did, and the compiled form compiles more (BERT-base bf16 on an H200: baselines 42 s, the
compiled form's verdict 70 s, against a reserve of 42 s: that apply ran 80 s past a 3.5 minute budget).

Measured (H200, GPT-2 small bf16 at 8 x 512 tokens, 2026-11-29): capture 7 s, profile 18 s, a region's baselines
12-17 s, one candidate's verdict about 20 s; before this, a "2 minute" apply ran past 5.5 minutes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

RESERVE_SHARE = 0.2  # of the budget, kept for the end-to-end verification and the final times
RESERVE_MIN_S = 20.0  # ... but at least this much, and never more than half the budget
RESERVE_MODEL_VERDICTS = 2.0  # ... and at least this many times the model's baselines took (a model verdict's cost)
SMALLEST_RUN_S = 10.0  # a region's run shorter than this verifies nothing: it is not started


@dataclass
class Deadline:
    budget_s: float | None  # None: no budget (each run's own limits)
    started: float = field(default_factory=time.monotonic)
    model_verdict_s: float = 0.0  # what a verdict of the model is expected to take (expect_model_verdict)

    @classmethod
    def of(cls, minutes: float | None) -> Deadline:
        return cls(minutes * 60.0 if minutes is not None else None)

    @property
    def reserve_s(self) -> float:
        if self.budget_s is None:
            return 0.0
        return min(max(RESERVE_MIN_S, RESERVE_SHARE * self.budget_s, RESERVE_MODEL_VERDICTS * self.model_verdict_s),
                   0.5 * self.budget_s)

    def expect_model_verdict(self, seconds: float) -> None:
        """A verdict of the model takes about `seconds` (what its baselines took to measure): the reserve grows to
        hold the end-to-end verdicts."""
        self.model_verdict_s = max(self.model_verdict_s, seconds)

    def left_s(self) -> float | None:
        """Seconds left of the whole budget (None: no budget)."""
        if self.budget_s is None:
            return None
        return self.budget_s - (time.monotonic() - self.started)

    def for_runs_s(self) -> float | None:
        """Seconds the regions' runs may still take, the reserve kept back (None: no budget)."""
        left = self.left_s()
        return None if left is None else max(left - self.reserve_s, 0.0)

    def sooner(self, seconds: float) -> Deadline:
        """This deadline moved `seconds` earlier (no budget stays none)."""
        return self if self.budget_s is None else Deadline(self.budget_s - seconds, self.started, self.model_verdict_s)

    def over(self) -> bool:
        left = self.left_s()
        return left is not None and left <= 0.0
