"""Chains: a forward that is a sequence of recognized ops (plan.py's Analysis.chain, each op naming the value it
reads), rendered as one Triton candidate whose ModelNew runs each op's kernels in turn.

Each op is rendered by its own family (triton_kernels.parts) into kernel sources and a forward body; the body
becomes a module-level helper `kc_op<i>_<kind>(self, x[, o0, o1, ...])` (matmul and losses: `(self, a, b)`,
the forward's first two inputs as passed; the numbers forward reads from the module for the op's kernels,
scalars.Scalars.of(op), come first after `self`: the forward reads them all once and passes them as values, so no
helper reads a scalar from `self`), and ModelNew's forward calls the helpers in order (results kc_v<i>),
each on the value it reads: a forward input (made contiguous) or an earlier op's result (fresh and contiguous);
an elementwise op's tensor operands (o0, ...) are inputs, results or parameters as they are (read through their
strides), while other families read the parameters of their epilogue themselves. A view op (flatten, reshape)
is a reshape in the forward, no kernel. Kernel sources two ops share verbatim are emitted once; a name
two ops define differently is renamed in the later op (`kc_pointwise_kernel` -> `kc_pointwise_kernel_2`, the
op's index), in its kernels and in its body.

Moves: a chain is searched through its lead op, the most expensive one (the first matmul, linear or conv; else
the first op that is not pointwise or a view; else the first op). Each of the lead's moves is a chain move, the
other ops on their first strict move (the first that needs no TF32 tolerance): the search explores tiles and
precision where most of the time goes, and the cheaper ops ride along on their family's best default. A chain
move's params are the lead's params plus "lead" (its index), so needs_relaxed reads them as the lead's.
"""

from __future__ import annotations

import json
import re

from kernelcraft.propose.builtin import triton_kernels
from kernelcraft.propose.builtin.compose import assemble, forward_signature
from kernelcraft.propose.builtin.plan import Op, operand_refs
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.triton_families.common import attr, indent
from kernelcraft.propose.builtin.triton_kernels import Move, needs_relaxed

LEAD_KINDS = ("matmul", "linear", "conv2d", "conv1d")  # the most expensive kinds: a chain's lead is one of them
FREE_KINDS = {"view"}  # no kernel: a reshape in the forward


def describe(ops: list[Op]) -> str:
    return " -> ".join(op.kind for op in ops)


def missing_kinds(ops: list[Op]) -> list[str]:
    """The kinds of `ops` that have no Triton family."""
    return sorted({op.kind for op in ops if op.kind not in FREE_KINDS} - triton_kernels.kinds())


def lead(ops: list[Op]) -> int:
    for i, op in enumerate(ops):
        if op.kind in LEAD_KINDS:
            return i
    for i, op in enumerate(ops):
        if op.kind not in FREE_KINDS and op.kind != "elementwise":
            return i
    return next(i for i, op in enumerate(ops) if op.kind not in FREE_KINDS)


def moves(ops: list[Op]) -> list[Move]:
    """The chain's moves: its lead op's, the other ops on their first strict moves."""
    i = lead(ops)
    others = [op.kind for j, op in enumerate(ops) if j != i and op.kind not in FREE_KINDS]
    tail = f"; then {', '.join(others)} on their first moves" if others else ""
    return [Move(f"{describe(ops)}: the {ops[i].kind} as {m.text[0].lower() + m.text[1:]}{tail}", m.category,
                 {**m.params, "lead": i}) for m in triton_kernels.moves(ops[i])]


def _first_strict(op: Op) -> dict:
    all_moves = triton_kernels.moves(op)
    return next((m for m in all_moves if not needs_relaxed(m)), all_moves[0]).params


def render(ops: list[Op], reference_source: str, params: dict) -> str:
    """The whole candidate file for the chain `ops`, its lead op on `params` (moves(ops)'s), the others on their
    first strict moves."""
    _, names = forward_signature(reference_source)
    i_lead = int(params.get("lead", lead(ops)))
    lead_params = {k: v for k, v in params.items() if k != "lead"}

    def value(ref, operand=False) -> str:
        if isinstance(ref, int):
            return f"kc_v{ref}"  # (a prefix no forward argument is likely to have)
        if isinstance(ref, tuple) and ref[0] == "attr":
            return attr(ref[1])
        index = 0 if ref == "x" else int(ref[1])
        if index >= len(names):
            raise ValueError(f"the chain reads input {index}; the reference's forward takes {len(names)}")
        return names[index] if operand else f"{names[index]}.contiguous()"

    kernels = _Kernels()
    every = sum((Scalars.of(op) for op in ops), Scalars())
    lines = [every.reads().rstrip("\n")] if every.items else []
    for j, op in enumerate(ops):
        if op.kind == "view":
            lines.append(f"kc_v{j} = {_view(op, value(op.src))}")
            continue
        _, blocks, body = triton_kernels.parts(op, lead_params if j == i_lead else _first_strict(op))
        body = kernels.add(blocks, body, j)
        if op.kind in triton_kernels.INPUTS:  # reads the forward's first inputs as passed (matmul, losses, attention)
            inputs = triton_kernels.INPUTS[op.kind]
            if len(names) < len(inputs):
                raise ValueError(f"a {op.kind} reference needs a forward(self, {', '.join(n.upper() for n in inputs)}, ...)")
            signature, args = ", ".join(inputs), ", ".join(names[:len(inputs)])
        else:  # an elementwise op's tensor operands are arguments; other families read their parameters themselves
            refs = operand_refs(op.detail.get("steps") or []) if op.kind == "elementwise" else []
            signature = ", ".join(["x", *(f"o{k}" for k in range(len(refs)))])
            args = ", ".join([value(op.src), *(value(r, operand=True) for r in refs)])
        helper, s = f"kc_op{j}_{op.kind}", Scalars.of(op)
        kernels.blocks.append(f"def {helper}(self, {s.params}{signature}):  # op {j}: {op.kind}\n"
                              + indent(body.strip("\n"), 4))
        lines.append(f"kc_v{j} = {helper}(self, {s.params}{args})")
    lines.append(f"return kc_v{len(ops) - 1}")
    if any(op.kind == "view" and "flatten" in op.detail for op in ops):
        kernels.blocks.append(_FLATTEN)
    head = (f"# ---- Triton kernels by kernelcraft's built-in engineer: chain {describe(ops)} "
            f"{json.dumps(params, sort_keys=True)}\n"
            "import math\n\nimport torch\nimport triton\nimport triton.language as tl")
    return assemble(reference_source, head, kernels.blocks, "\n".join(lines))


_FLATTEN = '''
def kc_flatten(t, start, end):  # torch.flatten's result as a reshape
    if t.dim() == 0:
        return t.reshape(1)
    s, e = start % t.dim(), end % t.dim()
    return t.reshape((*t.shape[:s], math.prod(t.shape[s:e + 1]), *t.shape[e + 1:]))
'''


def _view(op: Op, src: str) -> str:
    if "flatten" in op.detail:
        start, end = (int(v) for v in op.detail["flatten"])
        return f"kc_flatten({src}, {start}, {end})"
    return f"{src}.reshape({tuple(int(v) for v in op.detail['shape'])!r})"


class _Kernels:
    """The module-level blocks of a chain's file: each op's kernel sources, shared ones once, clashing names renamed."""

    def __init__(self):
        self.blocks: list[str] = []
        self.defined: set[str] = set()

    def add(self, blocks: list[str], body: str, index: int) -> str:
        """Add one op's kernel sources; its body with the names renamed that it had to rename."""
        emitted = {b.strip() for b in self.blocks}
        renames: dict[str, str] = {}
        while True:  # renaming may make a block differ from one emitted before: then its names clash too
            texts = [_rename(b, renames).strip() for b in blocks]
            clash = {n for t in texts if t not in emitted for n in _defined(t) if n in self.defined}
            if not clash:
                break
            renames.update({n: f"{n}_{index}" for n in clash})
        for t in texts:
            if t not in emitted:
                emitted.add(t)
                self.blocks.append(t)
                self.defined.update(_defined(t))
        return _rename(body, renames)


def _defined(block: str) -> list[str]:
    """The names a kernel source defines at module level (its unindented `def name(` and `NAME = ` lines). Read
    with a pattern, not ast: the search renders in threads, and CPython 3.11's ast.parse is not thread-safe."""
    return [m.group(1) or m.group(2) for m in re.finditer(r"^(?:def (\w+)\(|(\w+) *=)", block, re.M)]


def _rename(text: str, renames: dict[str, str]) -> str:
    if not renames:
        return text
    return re.sub(r"\b(" + "|".join(map(re.escape, renames)) + r")\b", lambda m: renames[m.group(1)], text)
