"""What strategies ask proposers, and what comes back.

A proposer answers three kinds of request: `ideas` (optimization ideas in plain words, each tagged
with a category), `implement` (a kernel, from the reference or a parent kernel, realizing one idea or
none) and `fix` (a new version of a kernel, given the verifier's feedback on it; multi-turn). Every
answer is text: parsing is shared (propose/parse.py), so a stored answer replays exactly on resume.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from kernelcraft.problems import Problem
from kernelcraft.target import Target

# The six idea categories, by short tag.
CATEGORIES = {
    "memory": "memory access",
    "async": "asynchrony and latency hiding",
    "precision": "data type and precision",
    "compute": "compute and instruction",
    "parallelism": "parallelism and occupancy",
    "control": "control flow and loops",
}
KINDS = ("ideas", "implement", "fix")


@dataclass
class Idea:
    text: str
    category: str  # a key of CATEGORIES, or "uncategorized"
    # What the proposer that offered it knows it by, beyond its words (the built-in engineer: its family and
    # parameters as JSON, Move.key), so that a reworded idea is still found again; None for a model's idea.
    move: str | None = None


@dataclass
class Kernel:
    """A kernel shown to the proposer: its source and what the verifier said of it."""

    source: str
    backend: str
    feedback: str  # verifier feedback rendered as text (propose/feedback.py)
    speedup_eager: float | None = None  # against the baseline measured when it was judged
    idea: str | None = None
    runtime_ms: float | None = None  # the median the verifier ranks kernels by (None: not correct)


@dataclass
class TriedIdea:
    """An idea this run has tried, and what it led to, in a few words ("2 implementations: compile_error
    (SyntaxError …); incorrect (relative error 0.31)" or "best 1.32x eager (0.512 ms), kept as kernel 1")."""

    text: str
    category: str
    outcome: str


@dataclass
class Turn:
    """One earlier turn of a multi-turn conversation: what was answered, what the verifier said."""

    answer: str
    feedback: str
    unusable: bool = False  # the answer held no kernel to judge (a parse error): ask for the format again


@dataclass
class Request:
    kind: str  # one of KINDS
    problem: Problem
    backend: str  # the backend asked for
    parents: list[Kernel] = field(default_factory=list)  # the current best kernels, fastest first (may be empty)
    base: int = 0  # implement/fix: the index in `parents` of the kernel to build on
    idea: Idea | None = None  # implement: the idea to realize (None: any improvement)
    count: int = 1  # ideas: how many ideas are wanted
    history: list[Turn] = field(default_factory=list)  # fix: the conversation so far
    inspirations: list[Kernel] = field(default_factory=list)  # evolve: other kernels to borrow from
    ask_idea: bool = False  # implement: the answer should state its idea and category first
    tried: list[TriedIdea] = field(default_factory=list)  # ideas: the ideas this run has tried, with outcomes
    failures: list[str] = field(default_factory=list)  # the last round's failed kernels, a line each
    target: Target | None = None  # what is timed, the baselines and the floor (None: not measured)

    def __post_init__(self):
        assert self.kind in KINDS, self.kind


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None  # USD; None when the model's price is unknown


# Finish reasons of an answer cut by the output limit: OpenAI-style APIs say `length`, Anthropic's `max_tokens`.
CUT_OFF = ("length", "max_tokens")


@dataclass
class Answer:
    """A proposer's raw answer. `error` is set (and `text` None) when no answer could be had."""

    messages: list[dict]  # what was sent
    text: str | None
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    attempts: int = 1
    seconds: float = 0.0
    finish: str | None = None  # why the answer ended, in the provider's words (stop, end_turn, length, …)
    output_limit: int | None = None  # tokens: the limit a cut-off answer hit (the one asked for, else those used)

    @property
    def cut_off(self) -> bool:
        """The answer ended at the output limit, not where the model meant to end it."""
        return self.finish in CUT_OFF


class FatalProposerError(RuntimeError):
    """A proposer that cannot answer anything (bad key, unknown model): the run stops instead of
    spending its budget on failures."""


class Proposer(Protocol):
    name: str  # e.g. "openai/o3", "anthropic/claude-sonnet-4-6", "builtin"

    def ask(self, request: Request) -> Answer:
        """Answer one request. Never raises for a bad or failed answer (Answer.error says why), only
        FatalProposerError when no request can be answered."""
        ...

    def coverage(self, problem: Problem, backend: str) -> object:
        """Before a run: raises a ValueError saying why it cannot write `backend` kernels for `problem` (the
        built-in engineer knows what it covers); returns where it can, or cannot tell (a model)."""
        ...

    def close(self) -> None: ...
