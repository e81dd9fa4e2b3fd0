"""CUDA (NVRTC) kernels of the built-in engineer: one Op plus a move's parameters -> a candidate file.

Used where hand-written CUDA reaches what Triton cannot express: softmax rows split over a thread-block
cluster with distributed shared memory; LayerNorm rows held in the registers of many blocks that exchange
their statistics through flag-synchronized global memory. These kernels run only on an NVIDIA GPU (sm_90+ for
clusters), so the proposer offers them only there. Families live in nvrtc_families/ with the same
`KINDS = {kind: (moves(op), render(op, params))}` contract as the Triton ones.
"""

from __future__ import annotations

import json

from kernelcraft.propose.builtin.compose import compose
from kernelcraft.propose.builtin.nvrtc_families import layernorm, softmax
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.triton_kernels import Move

_KINDS = {kind: entry for family in (softmax, layernorm) for kind, entry in family.KINDS.items()}


def kinds() -> set[str]:
    return set(_KINDS)


def moves(op: Op) -> list[Move]:
    if op.kind not in _KINDS:
        return []
    return [Move(text, category, dict(params), "cuda_nvrtc") for text, category, params in _KINDS[op.kind][0](op)]


def render(op: Op, reference_source: str, params: dict) -> str:
    p = {**moves(op)[0].params, **params}
    kernels, body = _KINDS[op.kind][1](op, p)
    head = (f"# ---- CUDA kernels (NVRTC) by kernelcraft's built-in engineer: {op.kind} {json.dumps(p, sort_keys=True)}\n"
            "import math\n\nimport torch\n\nfrom kernelcraft.backends.nvrtc import load_kernels")
    return compose(reference_source, head, kernels, body, None, op.kind)
