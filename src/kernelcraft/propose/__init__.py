"""Proposers: who writes candidates (a chat model, or the built-in engineer), behind one protocol."""

from kernelcraft.propose.base import CATEGORIES, Answer, Idea, Kernel, Proposer, Request, Turn, Usage

__all__ = ["CATEGORIES", "Answer", "Idea", "Kernel", "Proposer", "Request", "Turn", "Usage"]
