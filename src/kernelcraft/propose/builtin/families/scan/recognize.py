"""How scans are read: torch.cumsum / torch.cumprod and the tensor methods along one dim of a chain; a reverse
scan as torch spells it, flip(cumsum(flip(x, d), d), d). A flip is kept pending (values.Flipped): a scan along
its dim makes it a reverse scan (its result again a pending flip, which the flip after it undoes), a flip back
along the same dim undoes it, and anything else reading it is refused (the interpreter notes "flip")."""

from __future__ import annotations

import torch

from kernelcraft.propose.builtin.recognize import Recognizer, call
from kernelcraft.propose.builtin.values import Ew, Flipped

SPECS = {"cumsum": [("dim", None), ("dtype", None)], "cumprod": [("dim", None), ("dtype", None)],
         "flip": [("dims", None)]}


def _scan(kind: str):
    def handle(ix, node):
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


RECOGNIZER = Recognizer(functions={torch.cumsum: _scan("cumsum"), torch.cumprod: _scan("cumprod"), torch.flip: _flip},
                        methods={"cumsum": _scan("cumsum"), "cumprod": _scan("cumprod"), "flip": _flip})
