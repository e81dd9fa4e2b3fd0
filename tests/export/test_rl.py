"""rl rows: one per problem, the reference as ground truth, what a reward function needs."""

from __future__ import annotations

import pytest

from kernelcraft.export import build_rows, resolve_runs
from kernelcraft.export.prompts import render_prompt
from kernelcraft.problems import load_problem
from kernelcraft.ranking import champion

pytestmark = pytest.mark.slow


def rl(runs, refs, render=render_prompt):
    return build_rows(runs.store, resolve_runs(runs.store, refs), "rl", None, render)[0]


def test_one_row_per_problem_with_the_reference_and_the_verifier_settings(runs):
    out = {r["extra_info"]["problem"]: r for r in rl(runs, [runs.bench_id])}
    assert sorted(out) == ["level1/relu", "level1/sigmoid"]
    relu, sigmoid = out["level1/relu"], out["level1/sigmoid"]
    assert relu["data_source"] == "kernelcraft" and relu["ability"] == "kernel"
    assert relu["reward_model"] == {"style": "rule", "ground_truth": load_problem("level1/relu").source}
    assert sigmoid["reward_model"]["ground_truth"] == load_problem("level1/sigmoid").source
    info = relu["extra_info"]
    assert info["policy"] == {"name": "strict", "fp32": 1e-4, "fp16_bf16": 1e-2, "allow_tf32": False}
    assert (info["small"], info["compile_baseline"], info["timing_budget_s"]) == (True, False, 0.2)
    assert info["trials"] == 2 and info["timing_method"] and info["device"] == info["device_name"] == "cpu"
    assert info["eager_ms"] > 0 and info["compile_ms"] is None and info["backend"] == "triton"
    assert info["runs"] == [runs.bench_runs["level1/relu"]] and info["candidates"] == 5
    assert info["correct_candidates"] == 2 and "BLOCK = 4096" in info["best_source"]
    assert info["best_speedup_eager"] > 0 and info["best_runtime_ms"] > 0
    assert sigmoid["extra_info"]["correct_candidates"] == 0 and sigmoid["extra_info"]["best_source"] is None
    # the prompt is the stored first request: the reference alone
    first = next(c for c in runs.store.calls(runs.bench_runs["level1/relu"]) if c.key == "s/000")
    assert info["prompt_origin"] == "stored" and relu["prompt"] == first.messages
    assert "Write a custom kernel" in relu["prompt"][-1]["content"]


def test_a_problem_with_no_stored_first_request_gets_the_one_a_model_would_get(runs):
    """A tree run asks for ideas first and names an idea in every implement request: the prompt is
    rendered, and it is the very request refine's first turn sent (same problem, device, policy)."""
    (row,) = rl(runs, [runs.tree])
    refine_first = runs.store.calls(runs.refine)[0]
    assert row["extra_info"]["prompt_origin"] == "rendered"
    # the same request but for the target each run measured at its start (baselines are re-measured when
    # they drift between runs): the rendered one states the tree run's own stored target
    assert without_target(row["prompt"]) == without_target(refine_first.messages)
    eager = runs.store.target(runs.tree)["eager"]["median_ms"]
    assert f"Baselines here: PyTorch eager {eager:.4g} ms" in row["prompt"][-1]["content"]
    (bare,) = rl(runs, [runs.tree], render=None)
    assert bare["prompt"] == [] and bare["extra_info"]["prompt_origin"] == "none"


def test_runs_started_without_stored_settings_are_read_off_their_results(runs):
    (row,) = rl(runs, [runs.tree, runs.refine])
    info = row["extra_info"]
    assert info["runs"] == [runs.tree, runs.refine] and info["candidates"] == 7 and info["correct_candidates"] == 6
    assert info["small"] is None and info["timing_budget_s"] is None  # not stored, not guessed
    assert info["compile_baseline"] is False and info["policy"]["name"] == "strict"
    # the fastest beyond the spread: by run, round, key, a later one wins only when clearly faster
    order = sorted((c for run in (runs.tree, runs.refine) for c in runs.store.candidates(run) if c.correct),
                   key=lambda c: (c.run_id, c.round, c.key))
    fastest = champion(order, lambda c: (c.runtime_ms, c.runtime_iqr_ms))
    assert info["best_runtime_ms"] == fastest.runtime_ms and info["best_source"] == fastest.source


def without_target(messages: list[dict]) -> list[dict]:
    import re

    return [dict(m, content=re.sub(r"\nWhat is timed:.*?\n\n", "\n\n", m["content"], flags=re.S)) for m in messages]
