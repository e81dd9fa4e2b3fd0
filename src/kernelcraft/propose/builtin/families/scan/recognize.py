"""How scans are read: torch.cumsum / torch.cumprod and the tensor methods along one dim of a chain; a reverse
scan as torch spells it, flip(cumsum(flip(x, d), d), d). A flip is kept pending (values.Flipped): a scan along
its dim makes it a reverse scan (its result again a pending flip, which the flip after it undoes), a flip back
along the same dim undoes it, and anything else reading it is refused (the interpreter notes "flip").

An exclusive scan spelled as a cat of zeros and the scan of all but the last entries (exclusive.py) is read from
the graph at its cat: the size, narrow, select and zeros_like before it are claimed here too, and given x's own
value (read by nothing but the pattern) when they are its pieces; elsewhere they go to the interpreter's core
(sizes, cat) or are refused (narrow, select, zeros_like)."""

from __future__ import annotations

import torch

from kernelcraft.propose.builtin.families.scan import exclusive
from kernelcraft.propose.builtin.recognize import Recognizer, call
from kernelcraft.propose.builtin.values import Ew, Flipped

SPECS = {"cumsum": [("dim", None), ("dtype", None)], "cumprod": [("dim", None), ("dtype", None)],
         "flip": [("dims", None)]}


def _piece(ix, node):
    """x's own value when `node` is a piece of an exclusive scan's spelling (read by nothing but it), else None."""
    found = exclusive.piece(node)
    chain = ix.realize(ix.value(found[0])) if found else None
    return chain if isinstance(chain, Ew) else None


def _scan(kind: str):
    def handle(ix, node):
        if (inert := _piece(ix, node)) is not None:
            return inert
        name, p = call(node, SPECS[kind])
        if p is None:
            return ix.refuse(name, node)
        a, dim = ix.value(node.args[0]), p["dim"]
        if isinstance(a, Flipped) and type(dim) is int and dim == a.dim:  # cumsum(flip(x)): flip(reverse cumsum(x))
            src = ix.emit_chain(a.src).base
            return Flipped(ix.emit("scan", src, op=kind, dim=dim, dim_attr=ix.attr_name(dim, int), reverse=True),
                           dim)
        if isinstance(dim, bool) or not isinstance(dim, int):
            return ix.refuse(f"{name} over several dims" if isinstance(dim, (tuple, list)) else name, node)
        if not isinstance(chain := ix.realize(a), Ew):
            return ix.refuse(name, node)
        return ix.emit("scan", ix.emit_chain(chain).base, op=kind, dim=dim, dim_attr=ix.attr_name(dim, int))
    return handle


def _flip(ix, node):
    name, p = call(node, SPECS["flip"])
    if p is None:
        return ix.refuse(name, node)
    a, dims = ix.value(node.args[0]), p["dims"]
    dim = dims[0] if isinstance(dims, (tuple, list)) and len(dims) == 1 else dims
    if type(dim) is not int:
        return ix.refuse(name, node)
    if isinstance(a, Flipped):  # flipped back: the value as it was, if along the same dim
        return a.src if a.dim == dim else ix.refuse(name, node)
    return Flipped(chain, dim) if isinstance(chain := ix.realize(a), Ew) else ix.refuse(name, node)


def _cat(ix, node):
    """torch.cat: an exclusive scan's (exclusive.py), else the core's."""
    found = exclusive.match(node)
    if found is None or not isinstance(chain := ix.realize(ix.value(found[0])), Ew):
        return ix.cat(node)
    x, dim, kind = found
    return ix.emit("scan", ix.emit_chain(chain).base, op=kind, dim=dim, dim_attr=ix.attr_name(dim, int),
                   exclusive=True)


def _size(ix, node):
    """t.size(d): a piece of an exclusive scan's spelling, else the core's size (of a value, or of an input)."""
    if (inert := _piece(ix, node)) is not None:
        return inert
    found = ix.tensor_size(node)
    found = ix.size_of(node) if found is None else found
    return found if found is not None else ix.refuse("size", node)


def _pattern_only(name: str):
    """narrow, select, zeros_like, ones_like: covered only as pieces of an exclusive scan's spelling."""
    def handle(ix, node):
        inert = _piece(ix, node)
        return inert if inert is not None else ix.refuse(name, node)
    return handle


RECOGNIZER = Recognizer(functions={torch.cumsum: _scan("cumsum"), torch.cumprod: _scan("cumprod"), torch.flip: _flip,
                                   torch.cat: _cat, **{getattr(torch, n): _pattern_only(n)
                                                       for n in ("narrow", "select", "zeros_like", "ones_like")}},
                        methods={"cumsum": _scan("cumsum"), "cumprod": _scan("cumprod"), "flip": _flip,
                                 "size": _size, "narrow": _pattern_only("narrow"),
                                 "select": _pattern_only("select")})
