"""Prompts an export renders where the store holds none: the request a model gets for a problem, as the
proposer's prompt files write it (the rl prompt of problems whose runs stored no first request, and the
sft prompt of the built-in engineer's rows, which store a one-line description instead)."""

from __future__ import annotations

from pathlib import Path


def render_prompt(problem: str, source: str, backend: str, device: str, policy: str, idea: tuple | None = None,
                  parents: tuple = (), target: dict | None = None) -> list[dict]:
    """The messages a model gets for an implement request on `problem`, rendered from the proposer's prompt
    files: with no idea, the first request (the reference alone), the rl prompt of problems whose runs stored
    none; with `idea` ((text, category)) and `parents` (stored candidates: dicts with source, backend, result
    (a Result or None), parse_error, idea), the request a tree round sends, which stands in for the built-in engineer's one-line
    descriptions in sft rows. `target`: the run's stored target (sizes timed, baselines, floor), stated as
    the run's own requests stated it."""
    from kernelcraft.problems.problem import Problem
    from kernelcraft.propose import feedback
    from kernelcraft.propose.base import Idea, Kernel, Request
    from kernelcraft.propose.llm.proposer import prompt_messages
    from kernelcraft.verify.policy import get_policy
    from kernelcraft.target import Target

    p = get_policy(policy)
    shown = [Kernel(c["source"], c["backend"], feedback.render(c.get("result"), c.get("parse_error")),
                    c["result"].speedup_eager if c.get("result") else None, c.get("idea")) for c in parents]
    request = Request("implement", Problem(problem, Path(problem), source), backend, parents=shown,
                      idea=Idea(*idea) if idea else None, target=Target.from_dict(target) if target else None)
    return prompt_messages(request, _device_text(device), p.name, p.summary, p.allow_tf32, on_gpu=device != "cpu")


def _device_text(device: str) -> str:
    """The device as prompts describe it, read from the device when it is here; else its name as stored."""
    import torch

    from kernelcraft.hardware import describe_device

    if device == "cpu" or (device.startswith("cuda") and torch.cuda.is_available()):
        try:
            return describe_device(device)
        except Exception:  # noqa: BLE001 - a GPU index this machine does not have
            pass
    return f"{device} (the device the runs were verified on)"
