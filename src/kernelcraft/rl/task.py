"""A task: one problem and the verifier settings to judge its answers under, read from the row `kernelcraft
export --kind rl` writes (docs/export.md), or from its parts as verl hands them over (ground_truth, extra_info).

Rows come from JSONL or from Parquet through pandas, so values may arrive as numpy scalars, numpy arrays or NaN
for a missing value; they are read as plain Python here."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

from kernelcraft.errors import ConfigError
from kernelcraft.export.rl import DATA_SOURCE
from kernelcraft.problems import Problem
from kernelcraft.verify import TimingConfig, VerifyConfig

TRIALS = 6  # the verifier's default: one per input distribution
TIMING_BUDGET_S = 6.0


@dataclass(frozen=True)
class Settings:
    """What a verdict depends on besides the two sources: the cache's third key, and the verifier to use."""

    device: str = "auto"  # cpu, cuda (every GPU here), auto
    policy: str = "strict"
    size: str = "auto"  # small, full, auto
    trials: int = TRIALS
    compile_baseline: bool = True
    timing_budget_s: float = TIMING_BUDGET_S

    def key(self) -> str:
        return (f"{self.device}|{self.policy}|{self.size}|t{self.trials}|"
                f"{'c' if self.compile_baseline else 'nc'}|b{self.timing_budget_s:g}")

    def describe(self) -> str:
        """The settings in words: "policy strict, auto sizes, 6 trials, torch.compile timed, 6 s of timing"."""
        return (f"policy {self.policy}, {self.size} sizes, {self.trials} trials, torch.compile "
                f"{'timed' if self.compile_baseline else 'not timed'}, {self.timing_budget_s:g} s of timing")

    def verify_config(self, cache_dir: Path | None = None) -> VerifyConfig:
        config = VerifyConfig(policy=self.policy, trials=self.trials, size=self.size,
                              compile_baseline=self.compile_baseline, timing=TimingConfig(budget_s=self.timing_budget_s))
        if cache_dir is not None:
            config.cache_dir = Path(cache_dir)
        return config


@dataclass
class Task:
    problem: Problem
    backend: str | None  # the backend the prompt asks for (None: any)
    settings: Settings
    prompt: list = field(default_factory=list)  # the first request's messages, as the row holds them
    best_speedup_eager: float | None = None
    best_speedup_compile: float | None = None

    @property
    def sha(self) -> str:
        """sha256 of the problem's source (all 64 hex digits: the cache's first key)."""
        return hashlib.sha256(self.problem.source.encode()).hexdigest()

    def best_known(self, baseline: str) -> float | None:
        return self.best_speedup_compile if baseline == "compile" else self.best_speedup_eager

    @classmethod
    def from_row(cls, row: dict, device: str | None = None) -> "Task":
        """A task from an RL row (a dict with data_source, prompt, reward_model and extra_info)."""
        if not isinstance(row, dict):
            raise ConfigError(f"an RL row is a JSON object, not {type(row).__name__}")
        source = row.get("data_source")
        if source is not None and source != DATA_SOURCE:
            raise ConfigError(f"data_source {source!r}: kernelcraft scores its own rows ({DATA_SOURCE!r}) only")
        truth = (row.get("reward_model") or {}).get("ground_truth")
        task = cls.from_parts(truth, row.get("extra_info"), device=device)
        task.prompt = [dict(m) for m in _plain(row.get("prompt")) or []]
        return task

    @classmethod
    def from_parts(cls, ground_truth, extra_info: dict | None, device: str | None = None) -> "Task":
        """A task from verl's reward arguments: the reference source and the row's extra_info (None: the
        verifier's defaults, any backend). `device` overrides the row's."""
        from kernelcraft.inputs import as_problem

        if not isinstance(ground_truth, str) or "class Model" not in ground_truth:
            raise ConfigError("an RL row's reward_model.ground_truth must be the reference program's source "
                              "(KernelBench format, defining class Model)")
        info = {k: _plain(v) for k, v in (extra_info or {}).items()}
        name = info.get("problem") or "problem"
        policy = info.get("policy")
        policy = (policy.get("name") if isinstance(policy, dict) else policy) or "strict"
        small = info.get("small")
        trials = info.get("trials")
        budget = info.get("timing_budget_s")
        baseline = info.get("compile_baseline")
        settings = Settings(
            device=device or _device_kind(info.get("device")), policy=str(policy),
            size="auto" if small is None else ("small" if small else "full"),
            trials=int(trials) if trials else TRIALS,
            compile_baseline=True if baseline is None else bool(baseline),
            timing_budget_s=float(budget) if budget else TIMING_BUDGET_S)
        return cls(as_problem(ground_truth, name), info.get("backend") or None, settings,
                   best_speedup_eager=_number(info.get("best_speedup_eager")),
                   best_speedup_compile=_number(info.get("best_speedup_compile")))


def _device_kind(device) -> str:
    """The row's device as the scorer runs it: `cuda:N` becomes `cuda` (every GPU here judges the rows: a row
    exported from runs on GPU 3 is not bound to GPU 3); missing, `auto`."""
    if not device:
        return "auto"
    device = str(device)
    return "cuda" if device.startswith("cuda") else device


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _plain(value):
    """A value from JSON or from pandas as plain Python: numpy scalars as numbers, arrays as lists, NaN and
    pandas' missing values as None."""
    if value is None:
        return None
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # numpy scalars and arrays
        return _plain(value.tolist())
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if type(value).__name__ in ("NAType", "NaTType"):
        return None
    return value
