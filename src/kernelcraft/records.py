"""What the run store gives back: one typed record per stored thing (a run, a candidate with its result's headline,
an apply, a bench, a model call, an idea, a run's call usage). Everything above the store reads these by attribute;
none reads a stored row by a string key (tests/test_floors.py checks the source for it). A record's `to_dict()` is
its JSON form, for the faces that print one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from kernelcraft.result import ranked_time
from kernelcraft.spec import ApplySpec, RunSpec


class Record:
    @classmethod
    def of(cls, row: dict):
        """The record of a decoded row: its columns by name (a column the record does not know is left out, so an
        older kernelcraft reads a newer store)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Lifecycle:
    """A stored run's or apply's status: running, then done, stopped or failed."""

    status: str

    @property
    def running(self) -> bool:
        return self.status == "running"


@dataclass(frozen=True)
class RunRecord(Record, Lifecycle):
    id: str
    problem: str
    problem_source: str
    strategy: str
    proposer: str
    device: str
    config: dict  # its RunSpec as stored (`spec`): everything needed to resume the run as it was started
    status: str  # running | done | stopped | failed
    created: float
    updated: float
    stop_reason: str | None = None
    best_candidate: int | None = None
    bench_id: str | None = None  # the bench it is one problem of
    apply_id: str | None = None  # the apply it is one region of
    elapsed: float | None = None  # seconds it has run over all its sessions (None: written before this was kept)

    @property
    def wall_seconds(self) -> float:
        """The seconds it ran over all its sessions, where stored (a resumed run counts its earlier ones; the pause
        between them is not counted), else from its first write to its last (older stores)."""
        return self.elapsed if self.elapsed is not None else self.updated - self.created

    @property
    def spec(self) -> RunSpec:
        """What it was asked to do, as it was started."""
        return RunSpec.from_dict(self.config)


@dataclass(frozen=True)
class CandidateRecord(Record):
    """A stored candidate, with its result's headline figures (None where not evaluated) and its idea."""

    id: int
    run_id: str
    key: str
    round: int
    origin: str  # proposer | seed | malformed
    backend: str
    source: str
    created: float
    call_id: int | None = None
    idea_id: int | None = None
    parent: int | None = None  # the candidate it was written from
    parse_error: str | None = None  # why the answer gave no evaluable kernel (then never evaluated)
    status: str | None = None  # the result's status (None: no result)
    correct: bool | None = None
    runtime_ms: float | None = None
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    runtime_iqr_ms: float | None = None
    review_resolved: bool | None = None  # a speedup flagged for review: whether the verifier confirmed it
    idea: str | None = None  # its idea's text
    category: str | None = None  # its idea's category

    @classmethod
    def of(cls, row: dict) -> CandidateRecord:
        row = dict(row)
        for name in ("correct", "review_resolved"):  # SQLite's 0 and 1
            if row.get(name) is not None:
                row[name] = bool(row[name])
        return super().of(row)

    @property
    def evaluated(self) -> bool:
        return self.status is not None

    @property
    def state(self) -> str:
        """Its status, or for one with no result why not (call_failed, malformed, not_evaluated)."""
        return self.status or unevaluated_status(self.parse_error)

    @property
    def spread(self) -> tuple[float, float | None] | None:
        """(cost ms, IQR ms) of a correct candidate's time, by its Result's rule (`result.ranked_time`); None when
        it has none, or when it is a speedup flagged for review that the verifier could not confirm (never a best)."""
        return ranked_time(self.correct, self.runtime_ms, self.runtime_iqr_ms, self.review_resolved)


@dataclass(frozen=True)
class ApplyRecord(Record, Lifecycle):
    id: str
    model: str
    model_source: str
    config: dict  # its ApplySpec as stored (`spec`): everything needed to resume it as it was started
    status: str  # running | done | stopped | failed
    created: float
    updated: float
    summary: dict | None = None  # apply/engine.py's ApplyOutcome, as far as it got

    @property
    def spec(self) -> ApplySpec:
        return ApplySpec.from_dict(self.config)


@dataclass(frozen=True)
class BenchRecord(Record):
    id: str
    suite: str
    config: dict  # its RunSpec as stored (`spec`); "not_covered", "too_large": problems that started no run
    created: float

    @property
    def spec(self) -> RunSpec:
        return RunSpec.from_dict(self.config)

    def skipped(self, status: str) -> dict[str, str]:
        """The problems that started no run for `status` (not_covered, too_large), each with why."""
        return self.config.get(status) or {}


@dataclass(frozen=True)
class CallRecord(Record):
    """One model call: the messages sent, the answer (None when the call failed), its tokens, cost and time."""

    id: int
    run_id: str
    key: str
    kind: str  # ideas | implement | fix
    model: str
    messages: list
    started: float
    seconds: float
    response: str | None = None
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None  # USD; None when the model has no known price
    attempts: int = 1
    finish: str | None = None  # why the answer ended, as the provider said
    output_limit: int | None = None  # the token limit a cut-off answer hit


@dataclass(frozen=True)
class IdeaRecord(Record):
    id: int
    run_id: str
    key: str
    round: int
    text: str
    category: str
    call_id: int | None = None
    parent: int | None = None


@dataclass(frozen=True)
class CallUsage(Record):
    """A run's model calls summed: how many, their tokens and cost, the failed and unpriced ones, the last error."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    unpriced: int = 0
    failed: int = 0
    last_error: str | None = None


REFUSED, FAILING = "proposer_error", "proposer_failing"  # stop reasons of a run whose proposer could not answer
NO_ANSWER = "no_answer"  # a candidate's parse_error when its proposer call failed: `no_answer (HTTP 500: …)`
UNEVALUATED = ("call_failed", "malformed", "not_evaluated")  # the statuses of a candidate with no result


def unevaluated_status(parse_error: str | None) -> str:
    """The status of a candidate that has no result: its call failed, its answer was unusable, or neither."""
    if not parse_error:
        return "not_evaluated"
    return "call_failed" if parse_error.startswith(NO_ANSWER) else "malformed"

