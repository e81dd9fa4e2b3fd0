"""The built-in kernel engineer as a proposer: no model, no key, no tokens.

It reads the reference (analyze.py), and for the op it recognized offers *moves*: optimization ideas in plain
words derived from the typed parameters of a kernel family that realizes it (registry.py lists the families;
for a chain of ops, the moves of its lead op: chain.py), each tagged with a category. On a GPU that runs them the
CUDA (NVRTC) families' moves come first for the kinds they serve: the candidate's backend is read from its source,
so one run mixes both. Asked for ideas, it offers moves not yet tried; asked to implement an idea, it renders that move's
kernel. Its answers are text in the same format a model would write, so they are stored, replayed and parsed
like any other.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from kernelcraft.errors import KernelcraftError
from kernelcraft.problems import Problem
from kernelcraft.propose.base import Answer, Request, Usage
from kernelcraft.propose.builtin import chain, registry
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Analysis, Op

STRATEGIES = ("tree", "refine")  # a deterministic engineer gives the same answer to the same request


class CoverageError(KernelcraftError):
    """A problem (or backend) the built-in engineer cannot write kernels for; the message says what."""


@lru_cache(maxsize=64)
def _analysis(source: str, path: str) -> Analysis:
    from pathlib import Path

    from kernelcraft.problems import load_problem

    return analyze(load_problem(Path(path)))


class BuiltinProposer:
    name = "builtin"

    def __init__(self, device: str, precision_moves: bool = False):
        """`precision_moves`: the tolerance policy admits lower-precision math (TF32 for fp32 work), so
        moves that use it may be offered; under a strict policy they never are."""
        self.device = device
        self.precision_moves = precision_moves

    def close(self) -> None:
        pass

    @staticmethod
    def backends() -> list[str]:
        """The backends the families write, the default first."""
        return list(registry.backends())

    def coverage(self, problem: Problem, backend: str) -> Analysis:
        """The analysis of `problem`; raises CoverageError saying what is not covered."""
        if backend not in registry.backends():
            raise CoverageError(f"the built-in engineer writes {', '.join(registry.backends())} kernels, not {backend}")
        analysis = _analysis(problem.source, str(problem.path))
        if analysis.untraceable:
            raise CoverageError(f"the built-in engineer cannot trace {problem.name}: {analysis.untraceable}, which "
                                f"torch.fx cannot trace; try --model with an LLM. torch.fx said: {analysis.error}")
        if analysis.error:
            raise CoverageError(f"the built-in engineer could not read {problem.name}: {analysis.error}")
        if analysis.single is None and analysis.chain is None:
            missing = analysis.unsupported or ["no op it knows"]
            raise CoverageError(f"the built-in engineer cannot cover {problem.name}: {', '.join(missing)}")
        if analysis.chain is not None:
            if backend != "triton":
                raise CoverageError(f"the built-in engineer's {backend} kernels cover single ops, not a chain of "
                                    f"{chain.describe(analysis.chain)} ({problem.name})")
            if all(op.kind in chain.FREE_KINDS for op in analysis.chain):
                raise CoverageError(f"the built-in engineer cannot cover {problem.name}: only views, nothing to "
                                    "compute")
            if missing := chain.missing_kinds(analysis.chain):
                raise CoverageError(f"the built-in engineer has no {backend} kernels for {', '.join(missing)} "
                                    f"({problem.name})")
            return analysis
        if analysis.single.kind not in registry.kinds(backend):
            raise CoverageError(f"the built-in engineer has no {backend} kernels for {analysis.single.kind} "
                                f"({problem.name}); its {backend} kernels cover: "
                                + ", ".join(sorted(registry.kinds(backend))))
        if backend == "cuda_nvrtc" and not (self.device.startswith("cuda") and _clusters(self.device)):
            raise CoverageError("the built-in engineer's cuda_nvrtc kernels need an NVIDIA GPU with thread-block "
                                "clusters (sm_90 or newer)")
        return analysis

    def moves(self, op, backend: str) -> list:
        """The moves for `op` (or a chain, a list of ops: chain.py's): CUDA ones first where a CUDA family serves
        the kind and there is a GPU, then the run's backend's; less the precision moves the policy does not admit,
        and on a CPU less the moves only a GPU tells apart (Params.gpu_only), where others are left."""
        if isinstance(op, list):
            moves = chain.moves(op)
        else:
            moves = registry.moves(op, backend)
            if backend != "cuda_nvrtc" and self.device.startswith("cuda") and _clusters(self.device):
                moves = registry.moves(op, "cuda_nvrtc") + moves
        moves = [m for m in moves if self.precision_moves or not m.relaxed]
        if not self.device.startswith("cuda"):
            moves = [m for m in moves if not m.gpu_only] or moves
        return moves

    def ask(self, request: Request) -> Answer:
        messages = [{"role": "user", "content": _describe(request)}]
        try:
            analysis = self.coverage(request.problem, request.backend)
            op: Op | list[Op] = analysis.single or analysis.chain
        except CoverageError as exc:
            return Answer(messages, None, error=str(exc))
        moves = self.moves(op, request.backend)
        if request.kind == "ideas":
            tried = {t.text for t in request.tried} | {p.idea for p in request.parents if p.idea}
            fresh = [m for m in moves if m.text not in tried][:request.count]
            text = "```json\n" + json.dumps([{"idea": m.text, "category": m.category, "move": m.identity}
                                              for m in fresh]) + "\n```\n"
            return Answer(messages, text, Usage(0, 0, 0.0))
        move = _choose(moves, request)
        if move is None:  # an idea it never offered (an older version's words, a seeded run's): said, not swapped
            return Answer(messages, None, error=f"the built-in engineer has no move {request.idea.text[:120]!r} for "
                                                f"{request.problem.name}; its moves here: "
                                                + "; ".join(m.text[:60] for m in moves[:6]))
        if isinstance(op, list):
            source = chain.render(op, request.problem.source, move.params, move.lead)
        else:
            source = registry.render(op, request.problem.source, move.params)
        text = f"Idea: {move.text}\nCategory: {move.category}\n\n```python\n{source.rstrip()}\n```\n"
        return Answer(messages, text, Usage(0, 0, 0.0))


@lru_cache(maxsize=8)
def _clusters(device: str) -> bool:
    """Whether `device` launches thread-block clusters (sm_90+), which the CUDA families use. A device
    string without a visible GPU (a proposer set up for one elsewhere) is taken at its word."""
    import torch

    if not torch.cuda.is_available():
        return True
    return torch.cuda.get_device_capability(torch.device(device))[0] >= 9


def _choose(moves: list, request: Request):
    """The move an implement or fix request asks for: the named idea, by what it is (its family and parameters,
    where the idea came from this engineer's answer) or else by its words (None when no move has them), else the
    first not yet shown."""
    if request.idea:
        if request.idea.move:
            found = next((m for m in moves if m.key == request.idea.move), None)
            if found is not None:
                return found
        return next((m for m in moves if m.text == request.idea.text), None)
    used = {p.idea for p in request.parents if p.idea}
    used |= {m.group(1).strip() for t in request.history for m in [re.search(r"^Idea: (.+)$", t.answer, re.M)] if m}
    return next((m for m in moves if m.text not in used), moves[0])


def _describe(request: Request) -> str:
    """What was asked, for the run store (the engineer has no prompt; this stands in for one)."""
    parts = [f"{request.kind} for {request.problem.name} ({request.backend})"]
    if request.idea:
        parts.append(f"idea: {request.idea.text}")
    if request.parents:
        parts.append("parents: " + "; ".join(p.idea or "(no idea)" for p in request.parents))
    if request.tried:
        parts.append(f"tried: {len(request.tried)} ideas")
    if request.history:
        parts.append(f"turn {len(request.history) + 1}")
    return " · ".join(parts)
