"""How argmax / argmin are read: torch.argmax / torch.argmin and the tensor methods, over one dim or over all
elements (dim None), of a chain over an input or an op's result. (The indices of torch.max / torch.min over a dim
are the interpreter's (values, indices) pairs: it emits an argreduce op where only the indices are read.)"""

from __future__ import annotations

import torch

from kernelcraft.propose.builtin.recognize import Recognizer, call
from kernelcraft.propose.builtin.values import Ew

SPECS = {"argmax": [("dim", None), ("keepdim", False)], "argmin": [("dim", None), ("keepdim", False)]}


def _argreduce(kind: str):
    def handle(ix, node):
        name, p = call(node, SPECS[kind])
        if p is None:
            return ix.refuse(name, node)
        dim = p["dim"]
        if isinstance(dim, bool) or not (isinstance(dim, int) or dim is None):
            return ix.refuse(f"{name} over several dims" if isinstance(dim, (tuple, list)) else name, node)
        if not isinstance(chain := ix.realize(ix.value(node.args[0])), Ew):
            return ix.refuse(name, node)
        src = ix.emit_chain(chain).base
        return ix.emit("argreduce", src, op=kind, dim=dim, dim_attr=ix.attr_name(dim, int) if dim is not None else None,
                       keepdim=bool(p["keepdim"]))
    return handle


RECOGNIZER = Recognizer(functions={torch.argmax: _argreduce("argmax"), torch.argmin: _argreduce("argmin")},
                        methods={"argmax": _argreduce("argmax"), "argmin": _argreduce("argmin")})
