"""A multi-turn environment over the verifier: `reset(problem)` gives the first request, `step(answer)` scores
the answer and gives back what a `refine` turn would be told (the verifier's feedback in the fix prompt, made by
the same code: propose.feedback.render and the LLM proposer's fix_message), its reward, whether the episode is
over, and the Score's parts. Answers are judged by a Scorer, so every guard and containment rule of `eval`
applies, verdicts are cached, and the candidate's code runs only in the verifier's worker subprocesses."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelcraft.propose import feedback
from kernelcraft.propose.base import Turn
from kernelcraft.rl.scorer import Scorer
from kernelcraft.rl.shape import CORRECT, Score
from kernelcraft.rl.task import Task


@dataclass
class Episode:
    task: Task
    messages: list[dict]  # the conversation so far: the first request, then each answer and its fix message
    turns: list[Turn] = field(default_factory=list)
    scores: list[Score] = field(default_factory=list)
    done: bool = False

    @property
    def best(self) -> Score | None:
        return max(self.scores, key=lambda s: s.score, default=None)


class KernelEnv:
    """`reset(problem) -> observation`, `step(answer) -> (observation, reward, done, info)`.

    `reset`'s observation is the first request's chat messages (the row's prompt; rendered from the proposer's
    prompt files where the row has none); `step`'s is the user message a refine turn sends after the answer: the
    verifier's feedback and what to do next. The episode ends after `max_turns` answers, or at the first correct
    kernel at least `stop_speedup` times faster than the baseline (None: never early). `env.messages` is the
    whole conversation, ready for the model's next turn."""

    def __init__(self, scorer: Scorer | None = None, *, max_turns: int = 4, stop_speedup: float | None = None,
                 **scorer_options):
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self._owned = scorer is None
        self.scorer = scorer if scorer is not None else Scorer(**scorer_options)
        self.max_turns = max_turns
        self.stop_speedup = stop_speedup
        self.episode: Episode | None = None

    @property
    def messages(self) -> list[dict]:
        return self.episode.messages if self.episode else []

    def reset(self, problem: Task | dict) -> list[dict]:
        """Start an episode on a problem: an RL row (as `kernelcraft export --kind rl` writes it) or a Task."""
        task = self.scorer.task(problem)
        prompt = [dict(m) for m in task.prompt] or _render_prompt(task)
        self.episode = Episode(task, prompt)
        return [dict(m) for m in prompt]

    def step(self, answer: str) -> tuple[str, float, bool, dict]:
        score = self.scorer.score(self._open().task, answer)
        return self._advance(answer, score)

    async def astep(self, answer: str) -> tuple[str, float, bool, dict]:
        """`step` for an event loop: the verifier's wait does not block it."""
        score = await self.scorer.ascore(self._open().task, answer)
        return self._advance(answer, score)

    def _open(self) -> Episode:
        if self.episode is None:
            raise RuntimeError("call reset(problem) before step(answer)")
        if self.episode.done:
            raise RuntimeError("the episode is over: call reset(problem) to start another")
        return self.episode

    def _advance(self, answer: str, score: Score) -> tuple[str, float, bool, dict]:
        from kernelcraft.propose.llm.proposer import fix_message

        ep = self.episode
        turn = Turn(answer, feedback.render(score.result, score.parse_error),
                    unusable=score.result is None)
        observation = fix_message(turn)
        ep.turns.append(turn)
        ep.scores.append(score)
        ep.messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": observation}]
        fast_enough = (self.stop_speedup is not None and score.tier == CORRECT and score.speedup is not None
                       and score.speedup >= self.stop_speedup and not score.flagged)
        ep.done = len(ep.turns) >= self.max_turns or fast_enough
        info = {**score.to_dict(), "turn": len(ep.turns), "feedback": turn.feedback, "score_parts": score,
                "best_score": ep.best.score}
        return observation, score.score, ep.done, info

    def close(self) -> None:
        if self._owned:
            self.scorer.close()

    def __enter__(self) -> "KernelEnv":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _render_prompt(task: Task) -> list[dict]:
    """The first request for a row that holds no prompt, rendered from the proposer's prompt files as
    `kernelcraft export` renders one."""
    from kernelcraft.export.prompts import render_prompt

    import torch

    gpu = task.settings.device.startswith("cuda") or (task.settings.device == "auto" and torch.cuda.is_available())
    device = "cuda:0" if gpu else "cpu"
    return render_prompt(task.problem.name, task.problem.source, task.backend or "triton", device,
                         task.settings.policy)
