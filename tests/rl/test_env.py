"""The environment: reset gives the first request, step the verdict a refine turn would be told (the same
feedback code), its reward, and the end of the episode; the verl interaction drives the same steps."""

from __future__ import annotations

import asyncio

import pytest

from kernelcraft.propose import feedback
from kernelcraft.propose.base import Turn
from kernelcraft.propose.llm.proposer import fix_message
from kernelcraft.rl import KernelEnv, KernelInteraction, with_interaction
from tests.rl.conftest import answer, kernel, row

pytestmark = pytest.mark.slow


def test_an_episode_answers_each_turn_with_the_refine_feedback(scorer):
    env = KernelEnv(scorer, max_turns=3)
    first = env.reset(row("level1/relu"))
    assert [m["role"] for m in first] == ["system", "user"] and "class Model" in first[1]["content"]

    obs, reward, done, info = env.step("no kernel, just thoughts")
    assert obs == fix_message(Turn("no kernel, just thoughts", feedback.render(None, "no_code_block"), unusable=True))
    assert "could not be used: no code block" in obs and not done and info["tier"] == "malformed"

    wrong = answer(kernel("level1/relu", wrong=True))
    obs, reward_wrong, done, info = env.step(wrong)
    result = info["score_parts"].result
    assert obs == fix_message(Turn(wrong, feedback.render(result)))
    assert "Status: incorrect" in obs and "Fix what the verifier found" in obs and reward_wrong > reward

    obs, reward_ok, done, info = env.step(answer(kernel("level1/relu")))
    assert done and info["turn"] == 3 and info["correct"] and reward_ok > reward_wrong
    assert "Status: ok" in obs and info["best_score"] == reward_ok
    assert [m["role"] for m in env.messages] == ["system", "user"] + ["assistant", "user"] * 3
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("again")


def test_an_episode_may_end_at_the_first_kernel_fast_enough(scorer):
    env = KernelEnv(scorer, max_turns=5, stop_speedup=1e-9)
    env.reset(row("level1/relu"))
    _, _, done, _ = env.step(answer(kernel("level1/relu")))
    assert done


def test_the_verl_interaction_steps_the_same_environment(scorer, tmp_path):
    interaction = KernelInteraction({"name": "kernelcraft", "max_turns": 2, "device": "cpu",
                                     "cache_dir": str(tmp_path), "min_speedup": 1e-6, "speed_weight": 0.05})
    interaction.scorer = scorer  # the package's verifier, so no second pool starts
    r = with_interaction(row("level1/relu"))
    kwargs = r["extra_info"]["interaction_kwargs"]

    async def rollout():
        iid = await interaction.start_interaction(None, **kwargs)
        messages = [{"role": "user", "content": "write it"}, {"role": "assistant", "content": "thinking…"}]
        done1, text1, score1, info1 = await interaction.generate_response(iid, messages)
        messages += [{"role": "user", "content": text1},
                     {"role": "assistant", "content": answer(kernel("level1/relu"))}]
        done2, text2, score2, info2 = await interaction.generate_response(iid, messages)
        best = await interaction.calculate_score(iid)
        await interaction.finalize_interaction(iid)
        return (done1, score1, info1), (done2, score2, info2), best

    (done1, score1, info1), (done2, score2, info2), best = asyncio.run(rollout())
    assert not done1 and info1["tier"] == "malformed" and done2 and info2["tier"] == "correct"
    assert score2 > score1 and best == score2 and "score_parts" not in info2
