"""Chains: a forward that is a sequence of recognized ops (plan.py's Analysis.chain, each op naming the value it
reads), rendered as one Triton candidate whose ModelNew runs each op's kernels in turn.

Each op is rendered by its own family (registry.parts) into kernel sources and a forward body; the body
becomes a module-level helper `kc_op<i>_<kind>(self, x[, o0, o1, ...])` (matmul and losses: `(self, a, b)`,
the forward's first two inputs as passed; the numbers forward reads from the module for the op's kernels,
scalars.Scalars.of(op), come first after `self`: the forward reads them all once and passes them as values, so no
helper reads a scalar from `self`), and ModelNew's forward calls the helpers in order (results kc_v<i>),
each on the value it reads: a forward input (made contiguous) or an earlier op's result (fresh and contiguous);
an elementwise op's tensor operands (o0, ...), and those of a reduction's prologue, are inputs, results or parameters
as they are (read through their strides: plan.argument_refs), while other families read the parameters of their
epilogue themselves. A view op (flatten, reshape) is a reshape in the forward, no kernel. Each op's family names what it defines with the op's suffix
(`kc_conv2d_kernel_op3`: family.Names), so no two ops define a name differently; ops whose kernels are the same
apart from those names (a network's repeated layers) take the first such op's names and share its kernels, which
are emitted once.

Moves: a chain is searched through its lead op, the most expensive one (the first recurrent op, whose time steps
are launches in sequence; else the first matmul, linear or conv; else the first op that is not pointwise or a view;
else the first op). Each of the lead's moves is a chain move, the other ops on their first strict move (the first
that needs no TF32 tolerance): the search explores tiles and precision where most of the time goes, and the cheaper
ops ride along on their family's best default. A chain move (`ChainMove`) is the lead's index and the lead's move,
whose parameters say whether it needs a relaxed tolerance.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.compose import assemble, forward_signature
from kernelcraft.propose.builtin.family import HEADER_MARK, Move, Names, Params
from kernelcraft.propose.builtin.paths import parameter
from kernelcraft.propose.builtin.plan import RECURRENT, Op, argument_refs, states
from kernelcraft.propose.builtin.scalars import Scalars

LEAD_KINDS = ("matmul", "linear", "conv2d", "conv1d")  # the most expensive kinds: a chain's lead is one of them
FREE_KINDS = {"view"}  # no kernel: a reshape in the forward


def describe(ops: list[Op]) -> str:
    return " -> ".join(op.kind for op in ops)


def missing_kinds(ops: list[Op]) -> list[str]:
    """The kinds of `ops` that have no Triton family."""
    return sorted({op.kind for op in ops if op.kind not in FREE_KINDS} - registry.kinds("triton"))


def lead(ops: list[Op]) -> int:
    for i, op in enumerate(ops):
        if op.kind in RECURRENT:
            return i
    for i, op in enumerate(ops):
        if op.kind in LEAD_KINDS:
            return i
    for i, op in enumerate(ops):
        if op.kind not in FREE_KINDS and op.kind != "elementwise":
            return i
    return next(i for i, op in enumerate(ops) if op.kind not in FREE_KINDS)


@dataclass(frozen=True, eq=False)
class ChainMove:
    """A chain's move: its lead op (index `lead` in `ops`) on `move`, the other ops on their first strict moves."""

    ops: tuple[Op, ...]
    lead: int
    move: Move

    @property
    def text(self) -> str:
        others = [op.kind for j, op in enumerate(self.ops) if j != self.lead and op.kind not in FREE_KINDS]
        tail = f"; then {', '.join(others)} on their first moves" if others else ""
        text = self.move.text
        return f"{describe(list(self.ops))}: the {self.ops[self.lead].kind} as {text[0].lower() + text[1:]}{tail}"

    @property
    def category(self) -> str:
        return self.move.category

    @property
    def key(self) -> str:
        """Its lead op's index, family and parameters as JSON (its header says the same)."""
        return json.dumps(self.identity, sort_keys=True)

    @property
    def identity(self) -> dict:
        return {"lead": self.lead, **self.move.identity}

    @property
    def params(self) -> Params:
        return self.move.params

    @property
    def gpu_only(self) -> bool:
        return self.move.gpu_only

    @property
    def relaxed(self) -> bool:
        return self.move.relaxed

    backend = "triton"


def moves(ops: list[Op]) -> list[ChainMove]:
    """The chain's moves: its lead op's, the other ops on their first strict moves."""
    i = lead(ops)
    return [ChainMove(tuple(ops), i, m) for m in registry.moves(ops[i])]


def render(ops: list[Op], reference_source: str, params: Params | None = None, lead_index: int | None = None) -> str:
    """The whole candidate file for the chain `ops`: its lead op (`lead_index`, else lead(ops)) on `params` (a
    ChainMove's; None: its first strict move), the others on their first strict moves."""
    _, names = forward_signature(reference_source)
    i_lead = lead(ops) if lead_index is None else lead_index
    lead_move = registry.first_strict(ops[i_lead]) if params is None else registry.move_for(ops[i_lead], params)

    def value(ref, operand=False) -> str:
        if isinstance(ref, int):
            return f"kc_v{ref}"  # (a prefix no forward argument is likely to have)
        if isinstance(ref, tuple) and ref[0] == "attr":
            return parameter(ref)
        index = 0 if ref == "x" else int(ref[1])
        if index >= len(names):
            raise ValueError(f"the chain reads input {index}; the reference's forward takes {len(names)}")
        return names[index] if operand else f"{names[index]}.contiguous()"

    kernels = _Kernels()
    shared: dict[tuple, Names] = {}  # an op's kernels named without a suffix -> the names they were first given
    every = sum((Scalars.of(op) for op in ops), Scalars())
    lines = [every.reads().rstrip("\n")] if every.items else []
    for j, op in enumerate(ops):
        if op.kind == "view":
            lines.append(f"kc_v{j} = {_view(op, value(op.src), value)}")
            continue
        move = lead_move if j == i_lead else registry.first_strict(op)
        # ops whose kernels are the same but for their names share them (a network's repeated layers compile once)
        names_j = shared.setdefault(tuple(move.family.render(op, move.params, Names()).sources()), Names(f"_op{j}"))
        rendered = move.family.render(op, move.params, names_j)
        body = kernels.add(rendered.sources(), rendered.body, j)
        if inputs := registry.inputs(op.kind):  # reads the forward's first inputs as passed (matmul, losses, attention)
            if len(names) < len(inputs):
                raise ValueError(f"a {op.kind} reference needs a forward(self, {', '.join(n.upper() for n in inputs)}, ...)")
            signature, args = ", ".join(inputs), ", ".join(names[:len(inputs)])
        elif op.kind == "cat":  # its parts, each as it reads (an input made contiguous, a result)
            signature, args = "*parts", ", ".join(value(r) for r in op.detail["parts"])
        elif states(op):  # a recurrent op's input, then its initial states (inputs, results or parameters)
            signature, args = "x, *states", ", ".join([value(op.src), *(value(r) for r in states(op))])
        else:  # an elementwise op's and a prologue's tensor operands are arguments (plan.argument_refs)
            refs = argument_refs(op)
            signature = ", ".join(["x", *(f"o{k}" for k in range(len(refs)))])
            args = ", ".join([value(op.src), *(value(r, operand=True) for r in refs)])
        helper, s = f"kc_op{j}_{op.kind}", Scalars.of(op)
        kernels.blocks.append(f"def {helper}(self, {s.params}{signature}):  # op {j}: {op.kind}\n"
                              + indent(body.strip("\n"), 4))
        lines.append(f"kc_v{j} = {helper}(self, {s.params}{args})")
    lines.append(f"return kc_v{len(ops) - 1}")
    if any(op.kind == "view" and "flatten" in op.detail for op in ops):
        kernels.blocks.append(_FLATTEN)
    chosen = {"lead": i_lead, "family": lead_move.family.name, **lead_move.params.to_json()}
    head = (f"# ---- Triton kernels {HEADER_MARK}chain {describe(ops)} "
            f"{json.dumps(chosen, sort_keys=True)}\n" + lead_move.family.head)
    return assemble(reference_source, head, kernels.blocks, "\n".join(lines))


_FLATTEN = '''
def kc_flatten(t, start, end):  # torch.flatten's result as a reshape
    if t.dim() == 0:
        return t.reshape(1)
    s, e = start % t.dim(), end % t.dim()
    return t.reshape((*t.shape[:s], math.prod(t.shape[s:e + 1]), *t.shape[e + 1:]))
'''


def _view(op: Op, src: str, value) -> str:
    """The reshape a view op stands for, on `src`; `value(ref)` names a value a size is read from."""
    if "flatten" in op.detail:
        start, end = (int(v) for v in op.detail["flatten"])
        return f"kc_flatten({src}, {start}, {end})"
    if "squeeze" in op.detail:
        dim = op.detail["squeeze"]
        return f"{src}.squeeze()" if dim is None else f"{src}.squeeze({int(dim)})"
    if "unsqueeze" in op.detail:
        return f"{src}.unsqueeze({int(op.detail['unsqueeze'])})"
    sizes = [f"{value(s[1], True)}.size({int(s[2])})" if isinstance(s, list) else str(int(s))
             for s in op.detail["shape"]]
    return f"{src}.reshape(({', '.join(sizes)}{',' if len(sizes) == 1 else ''}))"


class _Kernels:
    """The module-level blocks of a chain's file: each op's sources, those two ops share verbatim once."""

    def __init__(self):
        self.blocks: list[str] = []
        self.defined: dict[str, str] = {}  # name -> the block that defines it

    def add(self, blocks: list[str], body: str, index: int) -> str:
        """Add op `index`'s sources (a block already emitted is not again); returns its body. Families name what
        they define per op (family.Names), so a name defined by two different blocks is a family's bug: raised."""
        for block in (b.strip() for b in blocks):
            if block in self.blocks:
                continue
            for name in _defined(block):
                if name in self.defined:
                    raise ValueError(f"op {index} defines {name} again, differently: a family left a name without "
                                     "its op's suffix (family.Names)")
                self.defined[name] = block
            self.blocks.append(block)
        return body


def _defined(block: str) -> list[str]:
    """The names a kernel source defines at module level (its unindented `def name(` and `NAME = ` lines). Read
    with a pattern, not ast: the search renders in threads, and CPython 3.11's ast.parse is not thread-safe."""
    return [m.group(1) or m.group(2) for m in re.finditer(r"^(?:def (\w+)\(|(\w+) *=)", block, re.M)]
