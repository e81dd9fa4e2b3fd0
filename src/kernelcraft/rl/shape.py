"""The reward's shape: how one verdict becomes a number a trainer optimizes (docs/rl.md).

Tiers, lowest first: an answer with no usable kernel (malformed) < a kernel that does not build < a kernel that
builds but is wrong (incorrect, runtime error, timeout) < a correct kernel, whose score rises with the log of its
speedup inside a band. A rejected kernel (a guard found a hack) scores at most the wrong tier; a speedup flagged
for review scores as the slowest correct kernel unless the shape says to trust a confirmed one. The order is
checked when a shape is made (`RewardShape.__post_init__`), so no choice of parameters can let a hack or a broken
kernel outscore a plain correct one."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from kernelcraft.result import Result, Status

# tier names, as Score.tier says them
MALFORMED, COMPILE_ERROR, WRONG, REJECTED, CORRECT, VERIFIER_ERROR = (
    "malformed", "compile_error", "wrong", "rejected", "correct", "verifier_error")
WRONG_STATUSES = (Status.INCORRECT, Status.RUNTIME_ERROR, Status.TIMEOUT)
REVIEW = "speedup_review"  # the verifier's flag on a speedup past the sanity bound or the roofline
FLAGGED_CHOICES = ("floor", "trust_confirmed")


@dataclass(frozen=True)
class RewardShape:
    """A correctness gate plus a log-speedup term (the shape Kevin-32B's multi-turn RL used), with fixed
    scores for the failure tiers. A correct kernel scores `correct + speed_weight * ln(s)`, s the speedup over
    `baseline` clipped to [min_speedup, max_speedup]."""

    malformed: float = 0.0  # no kernel in the answer (no code block, no ModelNew, cut off), or the wrong backend
    compile_error: float = 0.1  # the build failed (a Python syntax error included)
    wrong: float = 0.2  # incorrect, runtime error, timeout
    rejected: float = 0.0  # a guard or containment rule rejected it (a reward hack): at most `wrong`
    correct: float = 1.0  # a correct kernel exactly as fast as the baseline
    speed_weight: float = 0.3  # per unit of ln(speedup)
    min_speedup: float = 0.1  # slower than this scores as this (the correct band's floor)
    max_speedup: float = 10.0  # faster than this scores as this (the verifier's sanity bound)
    baseline: str = "eager"  # eager or compile (compile: where no torch.compile time was taken, eager)
    # a speedup the verifier flagged for review (past the sanity bound or the roofline): "floor" scores it as
    # the slowest correct kernel; "trust_confirmed" lets one the verifier confirmed on checked timed calls
    # (review_resolved) earn its speed term, an unconfirmed one still the floor
    flagged: str = "floor"
    verifier_error: float = 0.0  # the harness failed (never the kernel's fault): Score.verifier_error marks it
    require_backend: bool = True  # a kernel in another backend than the row asks for is malformed

    def __post_init__(self) -> None:
        if self.baseline not in ("eager", "compile"):
            raise ValueError(f"reward shape: baseline {self.baseline!r}; choose eager or compile")
        if self.flagged not in FLAGGED_CHOICES:
            raise ValueError(f"reward shape: flagged {self.flagged!r}; choose {' or '.join(FLAGGED_CHOICES)}")
        if not 0 < self.min_speedup < 1 < self.max_speedup:
            raise ValueError("reward shape: need 0 < min_speedup < 1 < max_speedup")
        if self.speed_weight <= 0:
            raise ValueError("reward shape: speed_weight must be positive (faster must score higher)")
        if not self.malformed < self.compile_error < self.wrong < self.floor:
            raise ValueError(f"reward shape: need malformed < compile_error < wrong < the slowest correct kernel "
                             f"(correct + speed_weight * ln(min_speedup) = {self.floor:.4g})")
        if self.rejected > self.wrong:
            raise ValueError("reward shape: rejected must be at most wrong (a hack never beats an honest failure)")

    @property
    def floor(self) -> float:
        """The score of the slowest correct kernel."""
        return self.correct + self.speed_weight * math.log(self.min_speedup)

    @property
    def ceiling(self) -> float:
        return self.correct + self.speed_weight * math.log(self.max_speedup)

    def speed_score(self, speedup: float) -> float:
        s = min(max(speedup, self.min_speedup), self.max_speedup)
        return self.correct + self.speed_weight * math.log(s)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def of(cls, options: "RewardShape | dict | None" = None, **more) -> "RewardShape":
        """A shape from a RewardShape, a dict of its fields, and/or keyword fields; an unknown name is an error."""
        if isinstance(options, RewardShape) and not more:
            return options
        values = dict(asdict(options) if isinstance(options, RewardShape) else (options or {}))
        values.update(more)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"reward shape: unknown parameter {unknown[0]!r}; the parameters are {', '.join(sorted(known))}")
        return cls(**values)


@dataclass
class Score:
    """One completion's reward and its parts. `to_dict()` is what verl's reward managers take: a dict with a
    "score" key whose other keys (the same for every completion, plain numbers, booleans and strings) are
    logged beside it."""

    score: float
    tier: str  # malformed, compile_error, wrong, rejected, correct, verifier_error
    format_ok: bool  # the answer held a kernel file (in the backend asked for)
    compiled: bool  # it got past the build (a rejected kernel: it ran at least one check)
    correct: bool
    speedup: float | None  # over the shape's baseline, as measured (before clipping)
    status: str  # the verifier's status, or "malformed"
    parse_error: str | None = None  # why the answer held no usable kernel
    guard_findings: tuple[str, ...] = ()  # the verifier's reasons when it rejected the kernel
    flagged: bool = False  # its speedup was flagged for review
    cached: bool = False  # the verdict came from the cache
    problem: str = ""
    candidate_sha: str | None = None  # sha256 of the kernel source (first 16 hex digits)
    best_known_speedup: float | None = None  # the row's best so far (extra_info.best_speedup_<baseline>)
    result: Result | None = None  # the verifier's verdict (None when nothing was verified)

    @property
    def verifier_error(self) -> bool:
        return self.tier == VERIFIER_ERROR

    def to_dict(self) -> dict:
        return {"score": float(self.score), "tier": self.tier, "format_ok": self.format_ok, "compiled": self.compiled,
                "correct": self.correct, "speedup": float(self.speedup or 0.0), "status": self.status,
                "parse_error": self.parse_error or "", "guard_findings": ",".join(self.guard_findings),
                "flagged": self.flagged, "cached": self.cached, "verifier_error": self.verifier_error}


def score_verdict(shape: RewardShape, result: Result | None, parse_error: str | None = None, **about) -> Score:
    """The Score of a verdict under `shape`: `result` is the verifier's (None when the answer held no kernel and
    `parse_error` says why); `about` fills the Score's descriptive fields (problem, candidate_sha, cached,
    best_known_speedup)."""
    if result is None:
        return Score(shape.malformed, MALFORMED, False, False, False, None, MALFORMED,
                     parse_error=parse_error or "no_answer", **about)
    status = Status(result.status) if result.status is not None else Status.VERIFIER_ERROR
    speedup = _speedup(result, shape.baseline)
    flagged = REVIEW in result.reasons
    common = dict(result=result, flagged=flagged, **about)
    if status == Status.OK:
        trusted = not flagged or (shape.flagged == "trust_confirmed" and result.review_resolved is True)
        value = shape.speed_score(speedup) if trusted and speedup else shape.floor
        return Score(value, CORRECT, True, True, True, speedup, str(status), **common)
    if status == Status.COMPILE_ERROR:
        return Score(shape.compile_error, COMPILE_ERROR, True, False, False, None, str(status), **common)
    if status in WRONG_STATUSES:
        return Score(shape.wrong, WRONG, True, True, False, None, str(status), **common)
    if status == Status.REJECTED:
        return Score(shape.rejected, REJECTED, True, result.trials > 0, False, None, str(status),
                     guard_findings=tuple(result.reasons), **common)
    return Score(shape.verifier_error, VERIFIER_ERROR, True, False, False, None, str(status), **common)


def _speedup(result: Result, baseline: str) -> float | None:
    if baseline == "compile" and result.speedup_compile:
        return result.speedup_compile
    return result.speedup_eager
