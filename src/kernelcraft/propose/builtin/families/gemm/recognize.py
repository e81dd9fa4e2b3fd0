"""How the GEMM family reads linear layers from a traced reference: nn.Linear modules and F.linear calls whose
weight (and bias) are the module's parameters, y = x @ weight.T + bias over the last dim of x. (A matmul of the
forward's inputs is read by the interpreter's core with the other operand patterns: analyze_operands.py.)"""

from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F

from kernelcraft.propose.builtin.recognize import Recognizer
from kernelcraft.propose.builtin.values import Attr, Ew


def _linear(ix, node, weight: str, bias: str | None):
    """The linear op over the value x reads (pointwise ops after it fold into its steps later)."""
    if not isinstance(chain := ix.realize(ix.value(node.args[0])), Ew):
        return ix.refuse("linear", node)
    return ix.emit("linear", ix.emit_chain(chain).base, weight=weight, bias=bias, steps=[])


def linear_module(ix, node, mod: nn.Linear):
    """self.fc(x): its weight and bias by attribute path."""
    if len(node.args) != 1 or node.kwargs:
        return ix.refuse("linear", node)
    return _linear(ix, node, f"{node.target}.weight", f"{node.target}.bias" if mod.bias is not None else None)


def linear_function(ix, node):
    """F.linear(x, self.w[, self.b]): weight and bias must be the module's parameters."""
    given = dict(zip(("weight", "bias"), node.args[1:]), **node.kwargs)
    w, b = ix.value(given.get("weight")), ix.value(given.get("bias"))
    if len(node.args) > 3 or set(given) - {"weight", "bias"} or not isinstance(w, Attr) \
            or not (b is None or isinstance(b, Attr)):
        return ix.refuse("linear", node)
    return _linear(ix, node, w.path, b.path if b is not None else None)


RECOGNIZER = Recognizer(modules={nn.Linear: linear_module}, functions={F.linear: linear_function})
