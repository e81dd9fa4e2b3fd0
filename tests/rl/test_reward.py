"""verl's custom reward functions, as verl calls them: the row's parts in, a dict with "score" out; the default
verifier built from the row's settings and kept for the next calls."""

from __future__ import annotations

import pytest

from kernelcraft.rl import compute_score, compute_score_batch, scorer_for
from tests.rl.conftest import answer, kernel, row

pytestmark = pytest.mark.slow


def test_compute_score_and_its_batch_form_as_verl_calls_them(tmp_path):
    r = row("level1/relu", trials=2)
    options = dict(cache_dir=str(tmp_path), min_speedup=1e-6, speed_weight=0.05)
    args = dict(data_source=r["data_source"], ground_truth=r["reward_model"]["ground_truth"],
                extra_info={**r["extra_info"], "num_turns": 1, "rollout_reward_scores": {}})
    good = compute_score(solution_str=answer(kernel("level1/relu")), **args, **options)
    assert good["score"] > 0.3 and good["correct"] and good["tier"] == "correct" and not good["cached"]
    scorer = scorer_for(**options)
    assert len(scorer._verifiers) == 1  # made from the row's settings, and kept
    batch = compute_score_batch([args["data_source"]] * 2, [answer(kernel("level1/relu")), "no code"],
                                [args["ground_truth"]] * 2, [args["extra_info"]] * 2, **options)
    assert [d["tier"] for d in batch] == ["correct", "malformed"] and batch[0]["cached"]
    assert scorer_for(**options) is scorer and len(scorer._verifiers) == 1


def test_unknown_options_and_foreign_rows_are_refused():
    with pytest.raises(ValueError, match="unknown option 'speedweight'"):
        scorer_for(speedweight=1)
    with pytest.raises(ValueError, match="kernelcraft scores its own rows"):
        compute_score("gsm8k", "42", "class Model: pass\n", {})
