"""The reward functions a trainer plugs in as they are, in verl's custom-reward signatures:

- `compute_score(data_source, solution_str, ground_truth, extra_info=None, **options)` -> dict with "score"
  (verl's `naive`, `dapo` and `prime` reward managers call it once per completion);
- `compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **options)` -> list of dicts
  (verl's `batch` reward manager calls it once per step: every completion is submitted to the verifier at once).

`options` are verl's `custom_reward_function.reward_kwargs`: the reward shape's parameters (`speed_weight=0.5`,
or `shape={...}`), `device`, `cache_dir`, `cluster` (a Ray cluster to judge on; default $KERNELCRAFT_CLUSTER) and
`actors`. Each distinct set of options gets one Scorer for the life of the process,
so the verifier's pool and workers are started once, not per completion; it is closed when the process exits."""

from __future__ import annotations

import atexit
import json
import threading
from dataclasses import fields

from kernelcraft.rl.scorer import Scorer
from kernelcraft.rl.shape import RewardShape

_SHAPE_FIELDS = {f.name for f in fields(RewardShape)}
_SCORER_OPTIONS = ("device", "cache_dir", "cache", "build_workers", "cluster", "actors")
_scorers: dict[str, Scorer] = {}
_lock = threading.Lock()


def scorer_for(**options) -> Scorer:
    """The process's Scorer for these options (made on first use): reward-shape parameters (flat, or as
    `shape`), and Scorer's `device`, `cache_dir`, `cache`, `build_workers`."""
    shape = dict(options.pop("shape", None) or {})
    shape.update({k: options.pop(k) for k in list(options) if k in _SHAPE_FIELDS})
    unknown = sorted(set(options) - set(_SCORER_OPTIONS))
    if unknown:
        raise ValueError(f"kernelcraft reward: unknown option {unknown[0]!r}; the options are the reward shape's "
                         f"parameters ({', '.join(sorted(_SHAPE_FIELDS))}) and {', '.join(_SCORER_OPTIONS)}")
    key = json.dumps({"shape": shape, **{k: str(v) for k, v in options.items()}}, sort_keys=True)
    with _lock:
        scorer = _scorers.get(key)
        if scorer is None:
            scorer = _scorers[key] = Scorer(shape=RewardShape.of(shape), **options)
        return scorer


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **options) -> dict:
    """One completion's reward: the row's problem (ground_truth, extra_info) verified against the kernel in
    `solution_str`; a dict with "score" and its parts (Score.to_dict)."""
    scorer = scorer_for(**options)
    return scorer.score(_row(data_source, ground_truth, extra_info), solution_str).to_dict()


def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **options) -> list[dict]:
    """A step's rewards, every completion submitted to the verifier at once; dicts in the order given."""
    scorer = scorer_for(**options)
    items = [(_row(d, g, e), s) for d, s, g, e in zip(data_sources, solution_strs, ground_truths, extra_infos,
                                                       strict=True)]
    return [score.to_dict() for score in scorer.score_batch(items).scores]


def _row(data_source, ground_truth, extra_info) -> dict:
    """verl's arguments as the row they came from (the Scorer reads it, the scorer's device overriding the row's)."""
    return {"data_source": data_source, "reward_model": {"ground_truth": ground_truth}, "extra_info": extra_info}


def close_all() -> None:
    with _lock:
        scorers = list(_scorers.values())
        _scorers.clear()
    for scorer in scorers:
        scorer.close()


atexit.register(close_all)
