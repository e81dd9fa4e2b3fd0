"""How triangles are read: torch.triu / torch.tril and the tensor methods, with a diagonal given as a number (read
from self.<attr> at run time where forward reads it there). Of a matmul's result (its pointwise steps folded into
it first), the triangle becomes the matmul's mask (plan.py: the GEMM applies it in its epilogue and skips the
output tiles it zeroes), where nothing else still reads the product unmasked; of any other value, a triangle op."""

from __future__ import annotations

import torch

from kernelcraft.propose.builtin.recognize import Recognizer, call
from kernelcraft.propose.builtin.values import Ew

SPEC = [("diagonal", 0)]


def _triangle(which: str):
    def handle(ix, node):
        name, p = call(node, SPEC)
        if p is None:
            return ix.refuse(name, node)
        diagonal = p["diagonal"]
        if type(diagonal) is not int:
            return ix.refuse(f"{name} (a diagonal computed in forward)", node)
        if not isinstance(chain := ix.realize(ix.value(node.args[0])), Ew):
            return ix.refuse(name, node)
        value = ix.emit_chain(chain)  # the steps before it folded into the op they follow, where it applies them
        detail = {"op": which, "diagonal": diagonal, "diagonal_attr": ix.attr_name(diagonal, int)}
        i = value.base
        if isinstance(i, int) and i == len(ix.ops) - 1 and ix.ops[i].kind == "matmul" \
                and not ix.ops[i].detail.get("mask") and ix.foldable(i, None, value):
            ix.ops[i].detail["mask"] = detail
            return value
        return ix.emit("triangle", i, **detail)
    return handle


RECOGNIZER = Recognizer(functions={torch.triu: _triangle("triu"), torch.tril: _triangle("tril")},
                        methods={"triu": _triangle("triu"), "tril": _triangle("tril")})
