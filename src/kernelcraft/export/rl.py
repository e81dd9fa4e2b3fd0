"""RL rows: one per problem (and verifier setting), in the layout RL trainers read: `data_source`,
`prompt` (chat messages), `ability`, `reward_model` {style, ground_truth: the reference source} and
`extra_info` (what a reward function needs to verify and time an answer the way these runs were judged,
and the best speedup known so far)."""

from __future__ import annotations

from statistics import median
from typing import Callable

from kernelcraft.export.steps import messages, run_steps
from kernelcraft.ranking import champion
from kernelcraft.records import UNEVALUATED, RunRecord
from kernelcraft.store import Store
from kernelcraft.verify.policy import POLICIES

DATA_SOURCE = "kernelcraft"
ABILITY = "kernel"

# (problem name, problem source, backend, device, policy name, idea=None, parents=()) -> the messages of an
# implement request (export/prompts.py: render_prompt); with no idea, the first one
RenderPrompt = Callable[..., list]


def rl_rows(store: Store, runs: list[RunRecord], render_prompt: RenderPrompt | None = None) -> list[dict]:
    groups: dict[tuple, list] = {}
    for run in runs:
        steps = run_steps(store, run)
        s = settings(run, steps)
        key = (run.problem, run.problem_source, s["backend"], run.device, s["policy"], s["small"])
        groups.setdefault(key, []).append((run, steps, s))
    return [_row(i, key, members, render_prompt, next(filter(None, (store.target(run.id) for run, _, _ in members)), None))
            for i, (key, members) in enumerate(groups.items())]


def settings(run: RunRecord, steps: list[dict]) -> dict:
    """The verifier settings a run was judged under: from its stored settings (`kernelcraft run` and
    `bench` store them), else read off its results."""
    config = run.config or {}
    verify = config.get("verify") or {}
    evaluated = [s for s in steps if s["status"] not in UNEVALUATED]
    compile_baseline = verify.get("compile_baseline")
    if compile_baseline is None and evaluated and any(s["eager_ms"] for s in evaluated):
        compile_baseline = any(s["compile_ms"] for s in evaluated)
    return {"backend": (config.get("run") or {}).get("backend") or (steps[0]["backend"] if steps else None),
            "policy": verify.get("policy") or next((s["policy"] for s in evaluated if s["policy"]), None),
            "small": verify.get("small"), "compile_baseline": compile_baseline,
            "timing_budget_s": verify.get("timing_budget")}


def _row(index: int, key: tuple, members: list, render_prompt: RenderPrompt | None, target: dict | None) -> dict:
    problem, source, backend, device, policy, small = key
    steps = [s for _, run_steps_, _ in members for s in run_steps_]
    evaluated = [s for s in steps if s["status"] not in UNEVALUATED]
    correct = [s for s in steps if s["correct"]]
    # the fastest beyond the spread: a later step (by run, round, key) displaces an earlier one only when
    # clearly faster, so timing noise does not pick the row's best
    best = champion(sorted(correct, key=lambda s: (s["run_id"], s["round"], s["step_key"])), step_spread)
    prompt, origin = _stored_prompt(steps), "stored"
    if prompt is None and render_prompt is not None and backend and policy:
        prompt, origin = render_prompt(problem, source, backend, device, policy, target=target), "rendered"
    if prompt is None:
        prompt, origin = [], "none"
    trials = [s["_trials"] for s in evaluated if s["_trials"]]
    methods = [s["_timing_method"] for s in evaluated if s["_timing_method"]]
    first = members[0][2]
    return {
        "data_source": DATA_SOURCE,
        "prompt": messages(prompt),
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": source},
        "extra_info": {
            "index": index, "problem": problem, "problem_sha": _sha(source), "backend": backend,
            "device": device, "device_name": next((s["device"] for s in evaluated), None),
            "policy": _policy(policy), "small": small, "trials": max(trials) if trials else None,
            "timing_method": methods[-1] if methods else None, "timing_budget_s": first["timing_budget_s"],
            "compile_baseline": first["compile_baseline"],
            "eager_ms": _median(s["eager_ms"] for s in evaluated),
            "compile_ms": _median(s["compile_ms"] for s in evaluated),
            "best_runtime_ms": best["runtime_ms"] if best else None,
            "best_speedup_eager": best["speedup_eager"] if best else None,
            "best_speedup_compile": best["speedup_compile"] if best else None,
            "best_source": best["source"] if best else None,
            "runs": [run.id for run, _, _ in members], "candidates": len(steps),
            "correct_candidates": len(correct), "prompt_origin": origin,
        },
    }


def step_spread(step: dict) -> tuple[float, float | None] | None:
    """(median ms, IQR ms) of a correct step's time (run_steps rows); None without one, or for a speedup
    flagged for review that the verifier could not confirm."""
    if not step["correct"] or step["runtime_ms"] is None or step.get("_review_resolved") is False:
        return None
    return step["runtime_ms"], step.get("_runtime_iqr_ms")


def _stored_prompt(steps: list[dict]) -> list | None:
    """The first stored model prompt that asks for a kernel from the reference alone: no parent kernel,
    no idea, no earlier turns (a `sample` or `refine` run's first request). The built-in engineer
    stores a description of the request, not a prompt, so its calls never qualify."""
    for s in steps:
        if (s["call_kind"] == "implement" and s["parent_id"] is None and s["idea"] is None and s["model"]
                and s["model"] != "builtin" and [m.get("role") for m in s["_messages"] or []] == ["system", "user"]):
            return s["_messages"]
    return None


def _policy(name: str | None) -> dict | None:
    if name is None:
        return None
    p = POLICIES.get(name)
    if p is None:
        return {"name": name, "fp32": None, "fp16_bf16": None, "allow_tf32": None}
    return {"name": p.name, "fp32": p.fp32, "fp16_bf16": p.half, "allow_tf32": p.allow_tf32}


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return median(values) if values else None


def _sha(source: str) -> str:
    import hashlib

    return hashlib.sha256(source.encode()).hexdigest()[:16]  # as Problem.sha
