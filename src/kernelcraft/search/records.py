"""What the engine keeps about a run while it works: its candidates, its counts, and futures of them."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field

from kernelcraft.propose import feedback
from kernelcraft.propose.base import Idea, Kernel
from kernelcraft.result import Result


@dataclass
class Cand:
    """A candidate of this run as the strategies see it."""

    id: int
    key: str
    round: int
    source: str
    backend: str
    parent: "Cand | None" = None
    idea: Idea | None = None
    idea_id: int | None = None
    answer: str | None = None  # the proposer's raw answer (for multi-turn conversations)
    parse_error: str | None = None
    result: Result | None = None  # the verifier's, once evaluated
    output_limit: int | None = None  # tokens: the answer was cut off at this limit (its kernel complete or not)
    profile: dict | None = None  # Profile.to_dict() (verify/profile), once profiled (--profile)

    @property
    def correct(self) -> bool:
        return bool(self.result and self.result.correct)

    @property
    def duplicate(self) -> bool:
        return bool(self.result and self.result.duplicate)

    @property
    def runtime_ms(self) -> float:
        return self.result.runtime_ms if self.correct and self.result.runtime_ms else float("inf")

    @property
    def spread(self) -> tuple[float, float | None] | None:
        """(cost ms, IQR ms) of a correct candidate's time, what rankings compare (`Result.ranked_spread`); None
        otherwise (a speedup flagged for review that the verifier could not confirm is never a best)."""
        return self.result.ranked_spread() if self.result else None

    @property
    def feedback(self) -> str:
        return feedback.render(self.result, self.parse_error, output_limit=self.output_limit, profile=self.profile)

    def kernel(self, eager_ms: float | None = None) -> Kernel:
        """The kernel as a proposer is shown it. `eager_ms`: the run's one eager baseline, so that the
        speedups of kernels judged at different moments (each against its own baseline) keep their order."""
        speedup = self.result.speedup_eager if self.result else None
        runtime = self.result.runtime_ms if self.correct else None
        if eager_ms and runtime:
            speedup = round(eager_ms / runtime, 4)
        return Kernel(self.source, self.backend, self.feedback, speedup, self.idea.text if self.idea else None,
                      runtime)


@dataclass
class Counters:
    calls: int = 0
    failed_calls: int = 0  # no answer after the retries (HTTP 5xx, timeouts, broken streams)
    last_error: str | None = None  # the latest failed call's error, one line
    malformed: int = 0  # answers with no usable kernel or ideas
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    unpriced_calls: int = 0
    candidates: int = 0  # created (or being asked for)
    evaluated: int = 0
    duplicates: int = 0
    withdrawn: int = 0  # evaluations queued when the wall budget ran out, never judged
    overhead_s: float = 0.0  # the orchestrator's own time: parsing, prompts' inputs, store writes
    replayed_calls: int = 0
    replayed_results: int = 0
    by_status: dict = field(default_factory=dict)


def done(value) -> Future:
    """A future that already holds `value` (a step replayed or refused: nothing to wait for)."""
    fut: Future = Future()
    fut.set_result(value)
    return fut
