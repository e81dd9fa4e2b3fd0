"""The verifier's verdict on one candidate: a plain record, JSON-ready."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

# `verifier_error`: the harness failed (out of memory in its own code, a fault of its own, a problem too
# large for the device): never counted against the candidate.
STATUSES = ("ok", "compile_error", "runtime_error", "timeout", "incorrect", "rejected", "verifier_error")


@dataclass
class Timing:
    """Statistics of one callable's timed calls, in milliseconds."""

    median_ms: float
    iqr_ms: float
    cv: float  # standard deviation over mean
    samples: int
    min_ms: float
    method: str  # e.g. "cuda_events+l2_flush", "cpu_perf_counter"

    def to_dict(self) -> dict:
        return asdict(self)

    def faster_than(self, other: "Timing") -> bool:
        """Faster beyond the measured spread (see `faster_beyond_spread`)."""
        return faster_beyond_spread(self.median_ms, self.iqr_ms, other.median_ms, other.iqr_ms)


def faster_beyond_spread(median_ms: float, iqr_ms: float | None, other_median_ms: float,
                         other_iqr_ms: float | None) -> bool:
    """Whether a timing (median, IQR) is faster than another by more than their spread.

    The rule: the other's median minus this one's exceeds half the sum of the two interquartile
    ranges, i.e. the middle halves of the two sets of samples, each taken as median +- IQR/2, do not
    overlap. A difference inside that band is noise (on a shared CPU eager's median moved 39% between
    evaluations), and calling it faster let noise pick winners. An IQR that was not recorded counts as 0.
    """
    return other_median_ms - median_ms > ((iqr_ms or 0.0) + (other_iqr_ms or 0.0)) / 2


@dataclass
class Result:
    problem: str
    candidate: str
    backend: str
    status: str = ""  # set by the first failing check, else "ok" once every check has passed
    correct: bool = False
    reasons: list[str] = field(default_factory=list)  # failures and review flags, by name
    message: str = ""  # the error or the first failing check, in one paragraph
    device: str = ""
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
    # seconds per phase: build_wait, worker_start, load, check, attribution, time, lock_wait
    phases: dict = field(default_factory=dict)
    # [start, end] (seconds since the epoch) of each timing phase, while the device's lock was held
    device_held: list[list[float]] = field(default_factory=list)
    # device memory: the estimate before the evaluation, the supervisor's and the worker's peaks (bytes)
    memory: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def runtime_ms(self) -> float | None:
        return self.runtime.median_ms if self.runtime else None

    def fail(self, status: str, reason: str, message: str = "") -> "Result":
        """Record a failure; the first one decides the status."""
        assert status in STATUSES, status
        if not self.status or self.status == "ok":
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
        return bool(self.status) and self.status != "ok"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["runtime_ms"] = self.runtime_ms
        d["eager_ms"] = self.eager.median_ms if self.eager else None
        d["compile_ms"] = self.compiled.median_ms if self.compiled else None
        return json_safe(d)


def json_safe(value):
    """JSON has no NaN or Infinity: such floats become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value
