"""An exclusive scan as torch spells it without a flag (upstream KernelBench's 92_cumsum_exclusive):

    torch.cat((torch.zeros_like(x.select(d, 0).unsqueeze(d)),
               torch.cumsum(x.narrow(d, 0, x.size(d) - 1), d)), d)

(ones_like and cumprod for a product), read from the fx graph as a whole: `match` takes the cat and says whether the
nodes feeding it are exactly that, each piece read by nothing else; `piece` takes any node and says whether it is a
piece of such a cat (walking its single users to the cat). The recognizer gives the pieces inert values (they are
read by nothing but the pattern) and the cat the exclusive scan."""

from __future__ import annotations

import operator

import torch
from torch import fx

from kernelcraft.propose.builtin import spellings

_IDENTITY = {"cumsum": torch.zeros_like, "cumprod": torch.ones_like}  # the scan's first entry


def _is(node, name: str, function=None) -> bool:
    return isinstance(node, fx.Node) and ((node.op == "call_method" and node.target == name)
                                          or (node.op == "call_function" and node.target is (function or
                                                                                              getattr(torch, name))))


def _args(node: fx.Node, spec: list) -> tuple[object, dict | None]:
    """The node's first operand and its other arguments by name (None: unexpected ones)."""
    return (node.args[0], spellings.bind(spec, node.args[1:], node.kwargs)) if node.args else (None, None)


def _only_user(node: fx.Node, user: fx.Node) -> bool:
    return list(node.users) == [user]


def match(cat: fx.Node) -> tuple[fx.Node, int, str] | None:
    """(x's node, d, "cumsum" | "cumprod") when `cat` is the spelling above, else None."""
    if not _is(cat, "cat") or cat.op != "call_function":
        return None
    given = dict(zip(("tensors", "dim"), cat.args), **cat.kwargs)
    parts, d = given.get("tensors"), given.get("dim", 0)
    if set(given) - {"tensors", "dim"} or not isinstance(parts, (tuple, list)) or len(parts) != 2 or type(d) is not int:
        return None
    first, scan = parts
    kind = next((k for k in _IDENTITY if _is(scan, k)), None)
    if kind is None or not _is(first, _IDENTITY[kind].__name__) or first.op != "call_function" \
            or len(first.args) != 1 or first.kwargs or not all(_only_user(n, cat) for n in parts):
        return None
    narrow, p = _args(scan, [("dim", None), ("dtype", None)])
    if p is None or p != {"dim": d, "dtype": None} or not _is(narrow, "narrow") or not _only_user(narrow, scan):
        return None
    x, p = _args(narrow, [("dim", None), ("start", None), ("length", None)])
    length = p and p["length"]
    if p is None or (p["dim"], p["start"]) != (d, 0) or not isinstance(length, fx.Node) \
            or length.target is not operator.sub or length.args[1:] != (1,) or length.kwargs \
            or not _only_user(length, narrow):
        return None
    size = length.args[0]
    if not _is(size, "size") or size.op != "call_method" or size.args != (x, d) or size.kwargs \
            or not _only_user(size, length):
        return None
    unsqueeze = first.args[0]
    if not _is(unsqueeze, "unsqueeze") or unsqueeze.args[1:] != (d,) or unsqueeze.kwargs \
            or not _only_user(unsqueeze, first):
        return None
    select = unsqueeze.args[0]
    if not _is(select, "select") or select.args != (x, d, 0) or select.kwargs or not _only_user(select, unsqueeze):
        return None
    return x, d, kind


def piece(node: fx.Node) -> tuple[fx.Node, int, str] | None:
    """What `match` finds for the cat that `node` feeds through single users (at most five steps), or None."""
    for _ in range(6):
        if _is(node, "cat") and node.op == "call_function":
            return match(node)
        users = list(node.users)
        if len(users) != 1:
            return None
        node = users[0]
    return None
