"""The built-in engineer's kernel families, one line each, and what the proposer, chains and analysis ask of them.

A family is a folder under families/ whose package exports `FAMILY` (family.py's contract). Adding one is its
folder and its line in FAMILIES below. Where several families serve one kind, the CUDA (NVRTC) ones come first on
a GPU that runs them (the proposer decides, proposer.moves).
"""

from __future__ import annotations

import importlib
from functools import cache

from kernelcraft.backends import get_backend
from kernelcraft.propose.builtin.compose import compose
from kernelcraft.propose.builtin.details import detail_problems as check
from kernelcraft.propose.builtin.family import Family, Move, Names, Params, Rendered
from kernelcraft.propose.builtin.plan import CORE_DETAILS, Analysis, Op
from kernelcraft.propose.builtin.scalars import Scalars

FAMILIES = (  # families/<name>: one line per family, in the order their moves are offered for a kind
    "pointwise",
    "cat",
    "channel_norm",
    "argreduce",
    "scan",
    "loss",
    "conv",
    "conv3d",
    "conv_transpose",
    "pool",
    "gemm",
    "attention",
    "pool3d",
    "conv_transpose3d",
    "rows",
    "norm",
    "softmax_cluster",  # CUDA (NVRTC)
    "layernorm_exchange",  # CUDA (NVRTC)
    "recurrent",
    "triangle",
)


@cache
def all_families() -> tuple[Family, ...]:
    out = []
    for name in FAMILIES:
        module = importlib.import_module(f"kernelcraft.propose.builtin.families.{name}")
        out += list(getattr(module, "FAMILIES", None) or [module.FAMILY])
    return tuple(out)


@cache
def backends() -> tuple[str, ...]:
    """The backends the families write, in the order the families are listed (the first: a run's default), each
    one the verifier's registry knows (kernelcraft.backends)."""
    names = tuple(dict.fromkeys(f.backend for f in all_families()))
    for name in names:
        get_backend(name)
    return names


def families(backend: str | None = None) -> list[Family]:
    return [f for f in all_families() if backend is None or f.backend == backend]


def kinds(backend: str | None = None) -> set[str]:
    return {kind for f in families(backend) for kind in f.kinds}


def family_for(kind: str, backend: str = "triton") -> Family:
    """The family that serves `kind` on `backend` (the first listed)."""
    for f in families(backend):
        if kind in f.kinds:
            return f
    raise ValueError(f"no {backend} kernel family for op kind {kind!r}")


def moves(op: Op, backend: str = "triton") -> list[Move]:
    """The moves for `op` on `backend`, most promising first (none when no family of the backend serves it)."""
    return [Move(f, p) for f in families(backend) if op.kind in f.kinds for p in f.moves(op)]


def first_strict(op: Op) -> Move:
    """The first Triton move for `op` that needs no relaxed tolerance (else its first)."""
    found = moves(op)
    return next((m for m in found if not m.relaxed), found[0])


def inputs(kind: str) -> tuple[str, ...] | None:
    """The names under which a kind's forward body reads the forward's first inputs as passed (("a", "b") for a
    matmul); None: it reads the first input as `x`, made contiguous."""
    for f in all_families():
        if kind in f.inputs:
            return tuple(f.inputs[kind])
    return None


def epilogue_kinds() -> set[str]:
    """The kinds whose kernels apply pointwise steps that follow them (folded into the op's "steps")."""
    return {k for f in all_families() for k in f.epilogue}


def operand_epilogue_kinds() -> set[str]:
    """Of those, the kinds whose epilogue also reads parameter tensors (x + self.bias)."""
    return {k for f in all_families() for k in f.operand_epilogue}


@cache
def detail_types() -> dict[str, type]:
    """Each op kind's detail type: the families' (`Family.details`) and the core's (plan.CORE_DETAILS). Families that
    serve one kind declare one type for it."""
    out = dict(CORE_DETAILS)
    for f in all_families():
        for kind, declared in f.details.items():
            if kind not in f.kinds:  # a family's ops.py may declare its sibling families' kinds too
                continue
            if out.setdefault(kind, declared) is not declared:
                raise ValueError(f"two detail types for {kind!r}: {out[kind].__name__} and family {f.name}'s "
                                 f"{declared.__name__}")
    return out


def detail_problems(op: Op) -> list[str]:
    """What is wrong with `op.detail` for its kind (details.py); a kind with no declared type is a problem too."""
    declared = detail_types().get(op.kind)
    if declared is None:
        return [f"no detail type declared for the op kind {op.kind!r}"]
    return check(op.detail, declared, f"{op.kind}.")


def checked(analysis: Analysis) -> Analysis:
    """`analysis`, or where an op's detail is not its kind's type, an analysis that says so (and has no ops)."""
    wrong = [p for op in analysis.ops for p in detail_problems(op)]
    if wrong:
        return Analysis([], error=f"analysis failed: an op's detail is not its kind's type: {'; '.join(wrong[:4])}")
    return analysis


def recognizers() -> list:
    """The families' recognizers (recognize.Recognizer), in registry order."""
    return [f.recognize for f in all_families() if f.recognize is not None]


def move_for(op: Op, params: Params, backend: str | None = None) -> Move:
    """The move `params` stands for on `op`: the family whose parameters they are and that serves the op's kind."""
    for f in families(backend):
        if op.kind in f.kinds and isinstance(params, f.params):
            return Move(f, params)
    raise ValueError(f"{type(params).__name__} are no parameters of a family for {op.kind!r}")


def parts(op: Op, params: Params, names: Names = Names()) -> Rendered:
    """One op's module-level blocks and forward body on `params`."""
    return move_for(op, params).family.render(op, params, names)


def render(op: Op, reference_source: str, params: Params) -> str:
    """The whole candidate file for the single op `op` on `params`."""
    move = move_for(op, params)
    rendered = move.family.render(op, params, Names())
    return compose(reference_source, move.header(op.kind) + "\n" + move.family.head, rendered.sources(),
                   rendered.body, inputs(op.kind), op.kind, Scalars.of(op))
