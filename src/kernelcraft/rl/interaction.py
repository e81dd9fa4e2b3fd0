"""The environment wrapped as a verl multi-turn interaction (`verl.interactions.base.BaseInteraction`'s methods:
start_interaction, generate_response, calculate_score, finalize_interaction, all async).

verl was chosen over gymnasium because it costs nothing: verl loads an interaction class by its dotted name
from a YAML file and only calls these four methods, so this class needs no verl import and kernelcraft no verl
dependency; it is the trainer the reward function (`kernelcraft.rl.compute_score`) already plugs into, and its
interactions speak chat messages, which is what the environment observes. gymnasium would need a dependency and
a text space for observations that are chat messages, for no trainer that reads them.

In verl's interaction config:

    interaction:
      - name: kernelcraft
        class_name: kernelcraft.rl.interaction.KernelInteraction
        config: {max_turns: 4, device: cuda}

and each row's `extra_info.interaction_kwargs` = {"name": "kernelcraft", "ground_truth": <reward_model.ground_truth>,
"extra_info": <the row's extra_info>} (`kernelcraft.rl.with_interaction(row)` adds it)."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from kernelcraft.rl.env import KernelEnv
from kernelcraft.rl.reward import scorer_for
from kernelcraft.rl.task import Task

NAME = "kernelcraft"


class KernelInteraction:
    """One KernelEnv per trajectory (instance id); one Scorer for them all (reward_kwargs-style options in
    `config`: the reward shape's parameters, device, cache_dir), so every trajectory's turns share the verifier's
    pool and cache. Each turn's reward is its answer's score; the interaction's score is the best turn's."""

    def __init__(self, config: dict[str, Any]):
        self.config = dict(config or {})
        self.name: str = self.config.pop("name", NAME)
        self.max_turns = int(self.config.pop("max_turns", 4))
        self.stop_speedup = self.config.pop("stop_speedup", None)
        self.scorer = scorer_for(**self.config)
        self._envs: dict[str, KernelEnv] = {}

    async def start_interaction(self, instance_id: str | None = None, ground_truth: str | None = None,
                                extra_info: dict | None = None, **kwargs) -> str:
        instance_id = instance_id or str(uuid4())
        env = KernelEnv(self.scorer, max_turns=self.max_turns, stop_speedup=self.stop_speedup)
        task = Task.from_row({"reward_model": {"ground_truth": ground_truth}, "extra_info": extra_info},
                             device=self.scorer.device)
        env.reset(task)
        self._envs[instance_id] = env
        return instance_id

    async def generate_response(self, instance_id: str, messages: list[dict[str, Any]], **kwargs
                                ) -> tuple[bool, str, float, dict[str, Any]]:
        """(should_terminate_sequence, the fix message, this turn's score, the Score's parts)."""
        env = self._envs[instance_id]
        answer = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "assistant"), "")
        observation, reward, done, info = await env.astep(answer)
        info.pop("score_parts", None)  # the Result stays here: verl logs plain values
        return done, observation, reward, info

    async def calculate_score(self, instance_id: str, **kwargs) -> float:
        episode = self._envs[instance_id].episode
        best = episode.best if episode else None
        return best.score if best else self.scorer.shape.malformed

    async def finalize_interaction(self, instance_id: str, **kwargs) -> None:
        self._envs.pop(instance_id, None)


def with_interaction(row: dict, name: str = NAME) -> dict:
    """An RL row with the `extra_info.interaction_kwargs` verl hands to `start_interaction`."""
    extra = dict(row.get("extra_info") or {})
    extra["interaction_kwargs"] = {"name": name, "ground_truth": row["reward_model"]["ground_truth"],
                                   "extra_info": {k: v for k, v in extra.items() if k != "interaction_kwargs"}}
    return {**row, "extra_info": extra}
