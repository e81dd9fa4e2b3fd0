"""What the built-in engineer understood of a reference: the ops it recognized, in a small IR.

`analyze.py` produces it from the reference (torch.fx over the instantiated Model); the kernel
families (families/*, listed in registry.py) turn one Op plus tuning parameters into a candidate file. Values that
belong to the module (eps, weights, the reduced dim given at init) are named by attribute path, so the
generated ModelNew reads them from itself at run time: nothing about sizes is baked in.

Passes over a finished list of ops (each keeps every value ref right, `renumber`): `needed_ops` keeps what the
result reads, `merge_elementwise` makes an elementwise op read only as the next one's src part of it, `drop` removes
an op whose readers read another value instead. Steps that read the op's own earlier values (`Own`: ("step", k), or
("step", k, branch) with scalar steps applied to it apart) are split only where `can_cut`, the rest `shift`ed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

# Pointwise steps an `elementwise` op may chain, with their parameters (Python floats, or "self.<attr>" for one forward
# reads from the module, read again at run time: scalars.py):
#   ["relu"], ["sigmoid"], ["tanh"], ["silu"], ["gelu"] (erf), ["gelu_tanh"], ["exp"], ["log"], ["abs"],
#   ["neg"], ["sqrt"], ["rsqrt"], ["square"], ["mish"], ["selu"], ["hardsigmoid"], ["hardswish"], ["softsign"],
#   ["round_bf16"], ["round_fp16"] (a cast to bfloat16 / float16 inside fp32 math: x.to(torch.bfloat16)),
#   ["elu", alpha], ["leaky_relu", slope],
#   ["hardtanh", lo, hi], ["clamp", lo_or_None, hi_or_None], ["softplus", beta, threshold],
#   ["add", c], ["sub", c], ["rsub", c] (c - x), ["mul", c], ["div", c], ["rdiv", c] (c / x), ["pow", c]
# Steps with a tensor operand: ["tadd", ref], ["tsub", ref], ["trsub", ref] (ref - x), ["tmul", ref], ["tdiv", ref],
# ["trdiv", ref] (ref / x), ["tmin", ref], ["tmax", ref] (torch.minimum/maximum: NaN wins), broadcast by torch's
# rules; ref is a value ref: "x" (the forward's first input), ("input", i) (its input i >= 1), an int i (the result of
# ops[i]), or ("attr", path) (a parameter or buffer of the module). Any in an elementwise op; in an epilogue only
# parameters: any in a conv's (conv1d/2d/3d, conv_transpose1d/2d/3d), a channel norm's (batchnorm, groupnorm,
# instancenorm) or a softmax's (read at the output's coordinates: families/conv/operands.py), in a linear's those of
# one value or one per column. Or ref is ("step", k), the op's own value after its first k steps (0: what
# it reads, the src or the producer's result; x * sigmoid(x + b) is [["tadd", b], ["sigmoid"], ["tmul", ("step", 1)]]),
# or ("step", k, branch), that value with the scalar steps `branch` (no tensor step) applied to it apart, in registers
# (0.5 * x * f(x) is f's steps then ["tmul", ("step", 0, (("mul", 0.5),))]): `Own`. No tensor to read, no value ref
# (operand_refs and reads leave it out), so any op that applies steps takes it
Step = list[Any]  # [name, *params], by the grammar above
Steps = list[Step]
TENSOR_STEPS = {"tadd", "tsub", "trsub", "tmul", "tdiv", "trdiv", "tmin", "tmax"}
UNARY = {"relu", "sigmoid", "tanh", "silu", "gelu", "gelu_tanh", "exp", "log", "abs", "neg", "sqrt", "rsqrt",
         "square", "mish", "selu", "hardsigmoid", "hardswish", "softsign", "round_bf16", "round_fp16"}
WITH_PARAMS = {"elu": 1, "leaky_relu": 1, "hardtanh": 2, "clamp": 2, "softplus": 2, "add": 1, "sub": 1, "rsub": 1,
               "mul": 1, "div": 1, "rdiv": 1, "pow": 1}


@dataclass
class Op:
    """One recognized computation over `src` (a value ref: "x", the forward's first input, by default; matmul and
    losses read the forward's first two inputs, attention its first three). A forward of several ops is a chain:
    each op names its input.

    kind: one the families serve (registry.kinds()), or "view" (a free reshape, no kernel: only within a chain).
    detail: that kind's typed dict, declared where its family lives (families/<family>/ops.py, `Family.details`;
    `View` here), checked after every analysis (details.py). Values that belong to the module (an eps, a weight, a
    dim given at init) are attribute paths or `*_attr` names, read again at run time.
    """

    kind: str
    detail: dict = field(default_factory=dict)
    src: object = "x"  # the value it reads: "x", ("input", i) or an earlier op's index


def operand_refs(steps) -> list:
    """The tensor operands of elementwise `steps`, each once, in order of first use (the kernel's o0, o1, ...): their
    value refs, not the op's own values (Own)."""
    refs = []
    for step in steps:
        if step[0] in TENSOR_STEPS and not is_own(step[1]) and step[1] not in refs:
            refs.append(step[1])
    return refs


def argument_refs(op: Op) -> list:
    """The tensor operands a chain passes to `op`'s helper (o0, o1, ...): an elementwise op's, and those of any op's
    prologue ("pre"); the other families read their epilogue's parameters themselves."""
    if op.kind == "elementwise":
        return operand_refs(op.detail.get("steps") or [])
    return operand_refs(op.detail.get("pre") or [])


class Own(tuple):
    """A tensor step's operand that is the op's own value: ("step", k), its value after its first k steps (x in
    x * f(x)), or ("step", k, branch), that value with the scalar steps `branch` ((name, *params), ...; no tensor
    step) applied to it apart, computed in registers beside the chain (0.5 * x in 0.5 * x * f(x)). A tuple, so it is
    hashable (chains hold it), equal to the literal it spells and JSON as a list; `Own.of` reads any such tuple."""

    __slots__ = ()

    def __new__(cls, k: int, branch=()):
        branch = tuple(tuple(s) for s in branch)
        return super().__new__(cls, ("step", k, branch) if branch else ("step", k))

    def __getnewargs__(self):  # copies and pickles rebuild it from (k, branch), not from the tuple it is
        return self.k, self.branch

    @classmethod
    def of(cls, ref) -> Own:
        return ref if isinstance(ref, Own) else cls(ref[1], ref[2] if len(ref) > 2 else ())

    @property
    def k(self) -> int:
        return self[1]

    @property
    def branch(self) -> tuple:
        return self[2] if len(self) > 2 else ()


def is_own(ref) -> bool:
    """Whether a tensor step's operand is the op's own value (Own: ("step", k) or ("step", k, branch))."""
    return isinstance(ref, tuple) and len(ref) in (2, 3) and ref[0] == "step"


def own_steps(steps) -> set[int]:
    """The k of every own value (Own) that `steps` read: the points where the kernel keeps x."""
    return {Own.of(s[1]).k for s in steps if s[0] in TENSOR_STEPS and is_own(s[1])}


def can_cut(steps, n: int) -> bool:
    """Whether steps[n:] can run on their own over the value steps[:n] make (in another op, or after a producer's
    epilogue): none of them reads an own value from before step n (a branch's own steps read nothing else)."""
    return not any(k < n for k in own_steps(steps[n:]))


def shift(steps, d: int):
    """`steps` (a list or tuple, of lists or tuples) with each own value ("step", k[, branch]) read as
    ("step", k + d[, branch]): what they read once d more steps come first (d < 0: once the first -d steps are gone,
    can_cut)."""
    def moved(s):
        if s[0] in TENSOR_STEPS and is_own(s[1]):
            own = Own.of(s[1])
            return type(s)([s[0], Own(own.k + d, own.branch)])
        return s
    return type(steps)(moved(s) for s in steps)


@dataclass
class Analysis:
    ops: list[Op]  # in forward order (each reads its src); the last one's result is the forward's
    unsupported: list[str] = field(default_factory=list)  # what it could not cover, in words ("conv2d", …)
    n_inputs: int = 1
    error: str | None = None  # the reference could not be traced (the reason)
    untraceable: str | None = None  # what its forward does that torch.fx cannot trace, in words (untraceable.py)

    @property
    def single(self) -> Op | None:
        """The op, when the forward is exactly one covered op over its first input(s) and nothing else."""
        if len(self.ops) != 1 or self.unsupported or self.error:
            return None
        op = self.ops[0]
        refs = operand_refs(op.detail.get("steps") or [])  # an epilogue's parameters are read by its family
        plain = op.src == "x" and op.kind not in ("view", "cat") and not (op.kind == "elementwise" and refs) \
            and not operand_refs(op.detail.get("pre") or []) \
            and all(isinstance(r, tuple) and r[0] == "attr" for r in refs) and not states(op)
        return op if plain else None

    @property
    def chain(self) -> list[Op] | None:
        """The ops, when the forward is a sequence of recognized ops (chain.py renders it) and not one plain op."""
        if not self.ops or self.unsupported or self.error or self.single is not None:
            return None
        return self.ops


def size_refs(op: Op) -> list:
    """The values a view's sizes are read from (its "shape" entries ["size", ref, dim])."""
    return [s[1] for s in op.detail.get("shape") or [] if isinstance(s, list)] if op.kind == "view" else []


RECURRENT = ("lstm", "gru")  # kinds whose initial states are value refs of their detail ("states")


def states(op: Op) -> list:
    """The initial states a recurrent op reads besides its input (none: zeros, or another kind)."""
    return list(op.detail.get("states") or []) if op.kind in RECURRENT else []


def reads(op: Op) -> list:
    """Every value ref `op` reads: its src, its steps' and its prologue's tensor operands, a view's size sources, a
    cat's parts, a recurrent op's initial states."""
    return [op.src, *operand_refs(op.detail.get("steps") or []), *operand_refs(op.detail.get("pre") or []),
            *size_refs(op),
            *(op.detail.get("parts") or [] if op.kind == "cat" else []), *states(op)]


def renumber(op: Op, new) -> None:
    """Make every value ref `op` reads (those `reads` lists) `new(ref)` instead."""
    op.src = new(op.src)
    for key in ("steps", "pre"):
        if key in op.detail:
            op.detail[key] = [[s[0], new(s[1])] if s[0] in TENSOR_STEPS else s for s in op.detail[key]]
    if op.kind == "view" and "shape" in op.detail:
        op.detail["shape"] = [["size", new(s[1]), s[2]] if isinstance(s, list) else s for s in op.detail["shape"]]
    if op.kind == "cat":
        op.detail["parts"] = [new(r) for r in op.detail["parts"]]
    if states(op):
        op.detail["states"] = [new(r) for r in op.detail["states"]]


def needed_ops(ops: list[Op], out) -> list[Op]:
    """The ops the forward's result `out` (a value ref) reads, directly or not, in order and renumbered: the others
    compute what the reference throws away. The result is then the last op (or no op, when it is an input)."""
    keep, todo = set(), [out]
    while todo:
        if isinstance(ref := todo.pop(), int) and ref not in keep:
            keep.add(ref)
            todo += reads(ops[ref])
    new = {old: i for i, old in enumerate(sorted(keep))}
    for i in keep:
        renumber(ops[i], lambda ref: new[ref] if isinstance(ref, int) else ref)
    return [ops[i] for i in sorted(keep)]


def drop(ops: list[Op], i: int, into) -> list[Op]:
    """`ops` without ops[i], in order and renumbered: what read its result reads the value ref `into` instead (an
    earlier op's index, or an input)."""
    def new(ref):
        if not isinstance(ref, int):
            return ref
        return into if ref == i else ref - 1 if ref > i else ref

    rest = ops[:i] + ops[i + 1:]
    for op in rest:
        renumber(op, new)
    return rest


def readers(ops: list[Op], i: int) -> list[int]:
    """Which ops read the result of ops[i], once per read (an op reading it twice is listed twice)."""
    return [j for j, op in enumerate(ops) for ref in reads(op) if ref == i]


def merge_elementwise(ops: list[Op]) -> list[Op]:
    """`ops` with each elementwise op whose result is read only as the src of a later elementwise op (not as an
    operand, by nothing else, and not the forward's result, the last op) merged into that op: one op, the steps
    concatenated, reading the first one's src, so its result makes no pass over memory of its own. Renumbered."""
    for i, op in enumerate(ops):
        if op.kind == "elementwise" and len(found := readers(ops, i)) == 1 \
                and (later := ops[found[0]]).kind == "elementwise" and later.src == i:
            later.detail["steps"] = op.detail["steps"] + shift(later.detail["steps"], len(op.detail["steps"]))
            later.src = op.src
            return merge_elementwise(drop(ops, i, op.src))
    return ops


class View(TypedDict, total=False):
    """A free reshape, no kernel, only within a chain: one of x.flatten(start, end), x.reshape/view of sizes (literal
    ints, -1 allowed, or ["size", ref, dim]: a size read at run time from a value ref, as x.view(x.size(0), -1)),
    x.squeeze(d) (None: every dim of size 1), x.unsqueeze(d)."""

    flatten: list[int]
    shape: list[Any]
    squeeze: int | None
    unsqueeze: int


CORE_DETAILS: dict[str, type] = {"view": View}  # the kinds no family serves (registry.detail_types adds the rest)
