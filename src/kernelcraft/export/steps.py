"""Candidate rows: one per (parent → idea → candidate → result) step of a run, as stored; the sft rows
are the steps whose candidate is correct and fast, with the conversation that produced it.

`correct` is only ever the stored verifier result's: a candidate with no result is `correct: false`,
with status `call_failed` (no answer: the proposer call failed), `malformed` (its answer held no evaluable
kernel) or `not_evaluated`.
"""

from __future__ import annotations

from kernelcraft.records import RunRecord
from kernelcraft.result import Result, Status
from kernelcraft.store import Store


def messages(raw) -> list[dict]:
    """Stored chat messages as plain {role, content} strings (content parts joined)."""
    out = []
    for m in raw or []:
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        out.append({"role": str(m.get("role", "")), "content": "" if content is None else str(content)})
    return out


def run_steps(store: Store, run: RunRecord) -> list[dict]:
    """Every candidate of `run` as a trajectories row, plus private fields (leading underscore) the sft
    and rl rows need: the call's messages and answer, the result's trials and timing method."""
    cands = store.candidates(run.id)
    calls = {c.id: c for c in store.calls(run.id)}
    by_id = {c.id: c for c in cands}
    verify = run.spec.verify
    run_policy = verify.policy if verify is not None else None
    results = store.results(run.id)
    rows = []
    for c in cands:
        result = results.get(c.id)
        call = calls.get(c.call_id)
        parent = by_id.get(c.parent)
        r = result or Result(run.problem, "", c.backend)  # no result: every figure None
        if result:
            status, correct = str(result.status), result.correct and result.status == Status.OK
        else:
            status, correct = c.state, False
        rows.append({
            "run_id": run.id, "bench_id": run.bench_id, "apply_id": run.apply_id, "problem": run.problem,
            "strategy": run.strategy, "model": call.model if call else None, "candidate_id": c.id,
            "step_key": c.key, "round": c.round, "backend": c.backend,
            "policy": (result.policy if result else None) or run_policy,
            "device": r.device or run.device,
            "idea": c.idea, "category": c.category, "origin": c.origin,
            "parent_id": c.parent, "parent_key": parent.key if parent else None,
            "parent_status": parent.state if parent else None,
            "parent_runtime_ms": parent.runtime_ms if parent and parent.correct else None,
            "parent_speedup_eager": parent.speedup_eager if parent and parent.correct else None,
            "source": c.source, "status": status, "correct": correct,
            "duplicate": r.duplicate, "runtime_ms": r.runtime_ms, "eager_ms": r.eager_ms, "compile_ms": r.compile_ms,
            "speedup_eager": r.speedup_eager, "speedup_compile": r.speedup_compile,
            "max_rel_error": r.max_rel_error, "reasons": list(r.reasons), "message": r.message or None,
            "parse_error": c.parse_error, "call_kind": call.kind if call else None,
            "input_tokens": call.input_tokens if call else None, "output_tokens": call.output_tokens if call else None,
            "cost": call.cost if call else None, "call_seconds": call.seconds if call else None,
            "_messages": call.messages if call else None, "_answer": call.response if call else None,
            "_trials": r.trials if result else None, "_timing_method": r.timing_method,
            # the spreads "faster" is judged by (ranking.py): IQR of the kernel's and the baselines' times
            "_runtime_iqr_ms": r.runtime.iqr_ms if r.runtime else None, "_review_resolved": r.review_resolved,
            "_eager_iqr_ms": r.eager.iqr_ms if r.eager else None,
            "_compile_iqr_ms": r.compiled.iqr_ms if r.compiled else None,
            "_problem_source": run.problem_source,
            "_parent": None if parent is None else {"source": parent.source, "backend": parent.backend,
                                                    "result": results.get(parent.id),
                                                    "parse_error": parent.parse_error, "idea": parent.idea},
        })
    return rows


def sft_row(step: dict, render_prompt=None) -> dict | None:
    """The chat that produced a candidate (the request's messages, then the answer), or None when there
    is none (a seed kernel the user gave, or a call that failed). The built-in engineer stores a one-line
    description, not a prompt: given `render_prompt` (export/prompts.py), its implement requests are
    rendered as the prompt a model would get for the same idea and parent (`prompt_origin` "rendered")."""
    if not step["_messages"] or step["_answer"] is None:
        return None
    request, origin = messages(step["_messages"]), "stored"
    if render_prompt is not None and step["model"] == "builtin" and step["call_kind"] == "implement" \
            and step["policy"]:
        idea = (step["idea"], step["category"] or "uncategorized") if step["idea"] else None
        request = render_prompt(step["problem"], step["_problem_source"], step["backend"], step["device"],
                                step["policy"], idea=idea, parents=(step["_parent"],) if step["_parent"] else ())
        origin = "rendered"
    chat = request + [{"role": "assistant", "content": step["_answer"]}]
    keep = ("run_id", "bench_id", "apply_id", "problem", "strategy", "model", "candidate_id", "step_key", "round", "backend",
            "policy", "device", "idea", "category", "call_kind", "runtime_ms", "eager_ms", "compile_ms",
            "speedup_eager", "speedup_compile", "source", "input_tokens", "output_tokens", "cost")
    return {"messages": chat, "prompt_origin": origin, **{k: step[k] for k in keep}}


def public(step: dict) -> dict:
    """A trajectories row: the step less its private fields."""
    return {k: v for k, v in step.items() if not k.startswith("_")}
