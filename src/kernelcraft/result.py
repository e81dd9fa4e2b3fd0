"""The verifier's verdict on one candidate: a typed record that every floor above the verifier reads as
it is (the engine, the store, reports, exports), JSON-ready through `to_dict` and back through `from_dict`.

It lives on the package's lowest floor, beside Candidate, because the run store keeps it: the store writes
`Result.to_dict()` and reads back a `Result`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from enum import Enum


class Status(str, Enum):
    """A verdict. A `str` too, so it compares equal to its value, prints as it and is written to JSON and
    SQLite as it."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    INCORRECT = "incorrect"
    REJECTED = "rejected"
    # the harness failed (out of memory in its own code, a fault of its own, a problem too large for the
    # device): never counted against the candidate
    VERIFIER_ERROR = "verifier_error"

    def __str__(self) -> str:
        return self.value


# A verdict's reason where the verifier was stopped (Ctrl-C, SIGTERM) while it judged: `verifier_error`, no verdict
# at all. A run stores none for it (the candidate stays unevaluated: a resumed run judges it).
INTERRUPTED = "interrupted"


STATUSES = tuple(s.value for s in Status)
# Before schema 2 of the store a fault of the harness itself was `runtime_error` with the reason
# `verifier_error`, counted against the candidate; it is now the status `verifier_error`, reason `verifier_fault`.
OLD_HARNESS_FAULT = "verifier_error"
# Keys `to_dict` adds for readers of the JSON (derived from the timings): `from_dict` drops them.
DERIVED = ("runtime_ms", "eager_ms", "compile_ms")


@dataclass
class Timing:
    """Statistics of one callable's timed calls, in milliseconds."""

    median_ms: float
    iqr_ms: float
    cv: float  # standard deviation over mean
    samples: int
    min_ms: float
    method: str  # e.g. "cuda_events+l2_flush", "cpu_perf_counter"
    # On a GPU (verify.timing): the host's time a call (median, from the call to its return), and the event time of a
    # few calls whose work reached the device queued behind a lead longer than that (median): the device's own time;
    # and the lead every timed call had (the L2 flush's device time). A median_ms well above device_ms holds host
    # time. None where not measured (the CPU, records from before).
    host_ms: float | None = None
    device_ms: float | None = None
    lead_ms: float | None = None

    @property
    def cost_ms(self) -> float:
        """What a call costs in a loop of calls, the time speedups and rankings use: the device's time or the host's,
        whichever is longer (a loop runs no faster than its host issues the calls). The device's time is the median
        where the host's time fit in the lead (the events saw the device's work alone), else `device_ms`: a median
        then holds the host's time past the lead, which moves with the lead's length and the host's load. Without a
        lead on record (records from before it), the median or the host's time, whichever is longer."""
        if self.host_ms is None:
            return self.median_ms
        if self.lead_ms is not None and self.device_ms is not None and self.host_ms > self.lead_ms:
            return max(self.device_ms, self.host_ms)
        return max(self.median_ms, self.host_ms)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Timing":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def faster_than(self, other: "Timing") -> bool:
        """Faster beyond the measured spread (see `faster_beyond_spread`), cost against cost."""
        return faster_beyond_spread(self.cost_ms, self.iqr_ms, other.cost_ms, other.iqr_ms)


def faster_beyond_spread(median_ms: float, iqr_ms: float | None, other_median_ms: float,
                         other_iqr_ms: float | None) -> bool:
    """Whether a timing (median, IQR) is faster than another by more than their spread.

    The rule: the other's median minus this one's exceeds half the sum of the two interquartile
    ranges, i.e. the middle halves of the two sets of samples, each taken as median +- IQR/2, do not
    overlap. A difference inside that band is noise (on a shared CPU eager's median moved 39% between
    evaluations), and calling it faster let noise pick winners. An IQR that was not recorded counts as 0.
    """
    return other_median_ms - median_ms > ((iqr_ms or 0.0) + (other_iqr_ms or 0.0)) / 2


def ranked_time(correct: bool, cost_ms: float | None, iqr_ms: float | None,
                review_resolved: bool | None) -> tuple[float, float | None] | None:
    """(cost ms, IQR ms) that a search may rank and a report may crown: a correct candidate's, timed, and not a
    speedup flagged for review that the verifier could not confirm; else None. The one rule for a Result
    (`Result.ranked_spread`) and for its stored record (`records.CandidateRecord.spread`)."""
    if not correct or not cost_ms or review_resolved is False:
        return None
    return cost_ms, iqr_ms


@dataclass
class Result:
    problem: str
    candidate: str
    backend: str
    status: Status | None = None  # set by the first failing check, else OK once every check has passed
    correct: bool = False
    reasons: list[str] = field(default_factory=list)  # failures and review flags, by name
    message: str = ""  # the error or the first failing check, in one paragraph
    device: str = ""
    node: str = ""  # the cluster node that judged it (Ray's node id, cut to 16); empty on one machine
    policy: str = "strict"
    # compile stage
    compile_seconds: float | None = None
    compile_log: str = ""
    kernels_resources: list[dict] = field(default_factory=list)  # ptxas registers / spills / smem
    # checks
    trials: int = 0
    max_rel_error: float | None = None
    trial_errors: list[dict] = field(default_factory=list)
    timed_checks: int = 0  # sampled timed calls checked on inputs changed in place between calls
    # the supervisor's own clock over calls on fresh inputs (verify/outside.py outside_clock): per_call_ms, calls,
    # attempts, limit_ms, copy_ms, checked, retimed (times the candidate was timed again before the clock passed)
    outside_clock: dict = field(default_factory=dict)
    # timing
    runtime: Timing | None = None
    eager: Timing | None = None
    compiled: Timing | None = None
    eager_control: Timing | None = None  # eager timed interleaved with the candidate, same worker
    baseline_cached: bool = False
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    roofline_fraction: float | None = None
    roofline_ms: float | None = None
    # A speedup beyond the sanity bound or the roofline: True once it held on timed calls checked with
    # inputs changed in place (real), False when it could not be confirmed (never a search's best).
    review_resolved: bool | None = None
    flops: int | None = None
    bytes: int | None = None
    sizes: dict = field(default_factory=dict)  # Sizes.to_dict(): source, the constants set, their full values
    # kernel attribution (profiler on a GPU; on the CPU, completed Triton launches and their share of the call)
    custom_kernel_fraction: float | None = None
    kernels: list[dict] = field(default_factory=list)
    # containment the worker ran under, and what was withheld from it
    containment: dict = field(default_factory=dict)
    # provenance
    versions: dict = field(default_factory=dict)
    seeds: list[int] = field(default_factory=list)  # revealed after the evaluation
    wall_seconds: float = 0.0
    # seconds per phase: build_wait, worker_start, load, check, attribution, time, lock_wait, standby_wait; the time
    # phase by its parts (time.baselines, time.warm, time.measure, time.clock), the load by the worker's own account of
    # its parts (load.device, load.reference, load.import, load.build: a diagnosis, reported from the candidate's
    # process)
    phases: dict = field(default_factory=dict)
    # [start, end] (seconds since the epoch) of each timing phase, while the device's lock was held
    device_held: list[list[float]] = field(default_factory=list)
    # device memory: the estimate before the evaluation, the supervisor's and the worker's peaks (bytes)
    memory: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # set by a search: the same source as an earlier candidate of the run, whose verdict this one reuses
    duplicate: bool = False

    def __post_init__(self) -> None:
        if self.status is not None:
            self.status = Status(self.status)  # a known status given as its string: the member

    @property
    def runtime_ms(self) -> float | None:
        return self.runtime.cost_ms if self.runtime else None

    @property
    def eager_ms(self) -> float | None:
        return self.eager.cost_ms if self.eager else None

    @property
    def compile_ms(self) -> float | None:
        return self.compiled.cost_ms if self.compiled else None

    @property
    def timing_method(self) -> str | None:
        """How the candidate (else the eager baseline) was timed, e.g. cuda_events+l2_flush."""
        timing = self.runtime or self.eager
        return timing.method if timing else None

    @property
    def trusted(self) -> bool:
        """Correct, timed, and not a speedup flagged for review that the verifier could not confirm: a time a
        search may rank and a report may crown."""
        return self.ranked_spread() is not None

    def ranked_spread(self) -> tuple[float, float | None] | None:
        """(cost ms, IQR ms) of the candidate's time where it is trusted (`ranked_time`), what rankings compare."""
        return ranked_time(self.correct, self.runtime_ms, self.runtime.iqr_ms if self.runtime else None,
                           self.review_resolved)

    def spread(self, timing: str = "runtime") -> tuple[float, float | None] | None:
        """(cost ms, IQR ms) of one of the timings (runtime, eager, compiled), what rankings compare."""
        t = getattr(self, timing)
        return (t.cost_ms, t.iqr_ms) if t is not None and t.median_ms is not None else None

    def fail(self, status: Status | str, reason: str, message: str = "") -> "Result":
        """Record a failure; the first one decides the status."""
        status = Status(status)
        if self.status is None or self.status == Status.OK:
            self.status = status
        self.correct = False
        if reason and reason not in self.reasons:
            self.reasons.append(reason)
        if message and not self.message:
            self.message = message
        return self

    def flag(self, reason: str, message: str) -> "Result":
        """A finding that does not fail the candidate but must not be trusted silently."""
        if reason not in self.reasons:
            self.reasons.append(reason)
        self.notes.append(f"{reason}: {message}")
        return self

    @property
    def failed(self) -> bool:
        return self.status is not None and self.status != Status.OK

    def to_dict(self) -> dict:
        d = asdict(self)
        d["status"] = Status(self.status).value if self.status is not None else None
        d["runtime_ms"] = self.runtime_ms
        d["eager_ms"] = self.eager_ms
        d["compile_ms"] = self.compile_ms
        return json_safe(d)

    @classmethod
    def from_dict(cls, d: dict) -> "Result":
        """The Result `to_dict` wrote, from this version or an older one: fields added since then take their
        defaults, an old harness fault its new status, and keys this version does not know are dropped (a newer
        store read by an older kernelcraft). A status it does not know is an error (ValueError)."""
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        for name in ("runtime", "eager", "compiled", "eager_control"):
            if kw.get(name) is not None:
                kw[name] = Timing.from_dict(kw[name])
        kw["status"] = Status(kw["status"]) if kw.get("status") else None
        reasons = list(kw.get("reasons") or [])
        if OLD_HARNESS_FAULT in reasons:
            reasons[reasons.index(OLD_HARNESS_FAULT)] = "verifier_fault"
            if kw["status"] == Status.RUNTIME_ERROR:
                kw["status"] = Status.VERIFIER_ERROR
        kw["reasons"] = reasons
        kw["duplicate"] = bool(kw.get("duplicate"))
        return cls(**kw)


def json_safe(value):
    """JSON has no NaN or Infinity: such floats become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value
