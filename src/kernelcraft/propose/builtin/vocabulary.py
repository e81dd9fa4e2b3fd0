"""The op vocabulary the region cutter (apply/regions.py) reads: which kind of op a captured graph's call is, by the
op's name (a torch function, a tensor method or an ATen op, without namespace or overload: apply/regions.op_name).

The kinds that start a region ("conv", "linear", "matmul", "norm", "pool", "softmax", "reduce", "attention") and the
pointwise ops the cutter fuses are declared by the families that serve them, each in its own folder (`Family.cut`),
so a new family's ops reach the cutter through its line in registry.py alone. What makes no kernel of its own
(reshapes, views, copies, concatenation: "free") is declared here. A name two kinds claim is an error, raised
when the vocabulary is first read.
"""

from __future__ import annotations

from functools import cache

from kernelcraft.propose.builtin.registry import all_families

POINTWISE, FREE, OTHER = "pointwise", "free", "other"

FREE_NAMES = frozenset({
    "view", "reshape", "transpose", "permute", "t", "expand", "expand_as", "squeeze", "unsqueeze", "flatten",
    "unflatten", "view_as", "narrow", "select", "split", "split_with_sizes", "chunk", "unbind", "getitem",
    "contiguous", "detach", "clone", "alias", "slice", "size", "_unsafe_view", "repeat", "cat", "stack", "pad",
    "getattr"})


class VocabularyError(ValueError):
    """Two kinds claim one op name."""


@cache
def vocabulary() -> dict[str, str]:
    """Every op name the cutter knows, with its kind."""
    kinds = dict.fromkeys(FREE_NAMES, FREE)
    claimed_by = dict.fromkeys(FREE_NAMES, "vocabulary.FREE_NAMES")
    for family in all_families():
        for kind, names in family.cut.items():
            for name in names:
                if kinds.setdefault(name, kind) != kind:
                    raise VocabularyError(f"{name!r} is cut as {kinds[name]} ({claimed_by[name]}) and as {kind} "
                                          f"(family {family.name})")
                claimed_by.setdefault(name, f"family {family.name}")
    return kinds


def kind_of(name: str) -> str:
    """A heavy kind (one that starts a region), POINTWISE, FREE, or OTHER for a name nobody declares."""
    return vocabulary().get(name, OTHER)


def heavy_kinds() -> set[str]:
    return set(vocabulary().values()) - {POINTWISE, FREE}
