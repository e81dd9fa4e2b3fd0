"""Triton kernels of the built-in engineer: one Op plus a move's parameters -> a candidate file.

A candidate is the reference source verbatim, then Triton kernels and `class ModelNew(Model)` whose
`forward` launches them. Everything about sizes is read from the inputs at run time, and what belongs to
the module (weights, eps, the reduced dim) from `self`, so every move is right on any shape.

Each family lives in triton_families/ and lists the op kinds it serves in `KINDS`: kind -> (moves(op),
render(op, params) -> (kernel sources, forward body)). A forward body reads the first input as `x` (made
contiguous), or, for the kinds whose family declares the inputs it reads (`INPUTS`: kind -> their names, e.g.
("a", "b") for a matmul, ("q", "k", "v") for attention), the first inputs under those names as passed. The
numbers forward reads from the module (scalars.py) are the op's `Scalars.of(op)`: a family's kernels that apply
the op's steps take them first, and its launches pass them first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kernelcraft.propose.builtin.compose import compose
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.triton_families import (argreduce, attention, channel_norm, conv, conv3d,
                                                         conv_transpose, gemm, loss, norm, pointwise, pool, rows, scan)

_FAMILIES = (pointwise, rows, norm, gemm, conv, conv3d, conv_transpose, pool, argreduce, scan, loss, channel_norm,
             attention)
_KINDS = {kind: entry for family in _FAMILIES for kind, entry in family.KINDS.items()}
# kind -> the names under which its forward body reads the first inputs (strides as given), from each family's
# INPUTS; any other kind reads the first input as `x`, made contiguous
INPUTS = {kind: names for family in _FAMILIES for kind, names in getattr(family, "INPUTS", {}).items()}


@dataclass(frozen=True)
class Move:
    text: str  # the optimization idea in plain words; unique within a kind (the proposer keys on it)
    category: str  # a CATEGORIES tag (propose/base.py)
    params: dict  # template parameters (JSON-able)
    backend: str = "triton"  # the registry that renders it (proposer.FAMILIES)


def kinds() -> set[str]:
    return set(_KINDS)


def needs_relaxed(move: Move) -> bool:
    """True for a move whose kernel is not exact in fp32 (TF32 tensor cores): a strict policy must skip it."""
    return move.params.get("precision") == "tf32"


def moves(op: Op) -> list[Move]:
    """The moves for `op`, most promising first; each is right on any input shape."""
    if op.kind not in _KINDS:
        raise ValueError(f"no Triton kernel family for op kind {op.kind!r}")
    return [Move(text, category, dict(params)) for text, category, params in _KINDS[op.kind][0](op)]


def parts(op: Op, params: dict) -> tuple[dict, list[str], str]:
    """(the parameters used: `params` over the first move's, kernel sources (module level), forward body)."""
    p = {**moves(op)[0].params, **params}
    return (p, *_KINDS[op.kind][1](op, p))


def render(op: Op, reference_source: str, params: dict) -> str:
    """The whole candidate file for `op` with `params` (missing keys: the first move's)."""
    p, kernels, body = parts(op, params)
    head = (f"# ---- Triton kernels by kernelcraft's built-in engineer: {op.kind} {json.dumps(p, sort_keys=True)}\n"
            "import math\n\nimport torch\nimport triton\nimport triton.language as tl")
    return compose(reference_source, head, kernels, body, INPUTS.get(op.kind), op.kind, Scalars.of(op))
