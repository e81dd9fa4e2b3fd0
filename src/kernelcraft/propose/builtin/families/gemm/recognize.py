"""How the GEMM family reads linear layers and einsum products from a traced reference: nn.Linear modules and
F.linear calls whose weight (and bias) are the module's parameters, y = x @ weight.T + bias over the last dim of x,
and torch.addmm(bias, x, weight) with the weight held (K, N) (GPT-2's Conv1D: `weight_kn`);
and torch.einsum of the forward's first two inputs where the equation is one matrix product (einsum_product). (A
matmul of the forward's inputs is read by the interpreter's core with the other operand patterns:
analyze_operands.py; an einsum ends there too, as the product it spells.)"""

from __future__ import annotations

import string

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelcraft.propose.builtin.recognize import Recognizer
from kernelcraft.propose.builtin.values import Attr, Ew, Operand


def _linear(ix, node, weight: str, bias: str | None, x=None, weight_kn: bool = False):
    """The linear op over the value x reads (node.args[0] unless given; pointwise ops after it fold into its steps
    later); `weight_kn`: the weight is held (K, N), x @ weight, as GPT-2's Conv1D holds it."""
    if not isinstance(chain := ix.realize(ix.value(node.args[0] if x is None else x)), Ew):
        return ix.refuse("linear", node)
    extra = {"weight_kn": True} if weight_kn else {}
    return ix.emit("linear", ix.emit_chain(chain).base, weight=weight, bias=bias, steps=[], **extra)


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


def addmm(ix, node):
    """torch.addmm(self.b, x, self.w): x @ w + b with w (K, N) and b one value per column, beta and alpha 1."""
    given = dict(zip(("input", "mat1", "mat2"), node.args), **node.kwargs)
    b, w = ix.value(given.get("input")), ix.value(given.get("mat2"))
    if len(node.args) != 3 or set(given) - {"input", "mat1", "mat2", "beta", "alpha"} \
            or any(given.get(k, 1) != 1 for k in ("beta", "alpha")) or not isinstance(w, Attr) \
            or not isinstance(b, Attr) or ix.param_dims(w.path) != 2 or ix.param_dims(b.path) != 1:
        return ix.refuse("addmm", node)
    return _linear(ix, node, w.path, b.path, x=given["mat1"], weight_kn=True)


def einsum_product(equation: str, ranks: tuple[int, int]) -> tuple[bool, bool] | str:
    """Whether an einsum equation over operands of `ranks` dims is op(A) @ op(B) as the matmul op reads it, and
    its (trans_a, trans_b); else why not, in words. One index is contracted: A's last (or, transposed, its
    second-to-last) with B's first (or, transposed, its last); B is 2-D (shared by every matrix of A, whose
    leading indices the output keeps in order: "bijl,lk->bijk") or 3-D with a batch index first in all three
    terms ("bij,bjk->bik"). A leading "..." in A and the output stands for A's leading dims; without "->" the
    output is the indices used once, in alphabetical order (torch's rule)."""
    eq = "".join(equation.split())
    terms, _, out = eq.partition("->")
    parts = terms.split(",")
    if len(parts) != 2:
        return f"einsum of {len(parts)} operands"
    sa, sb = parts
    if "." in sb or sa.count("...") > 1 or sa.count(".") != 3 * sa.count("..."):
        return f"einsum {equation!r} (an ellipsis other than A's leading dims)"
    if "->" not in eq:
        if "..." in sa:
            return f"einsum {equation!r} (an ellipsis without an output)"
        letters = sa + sb
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    if ("..." in sa) != out.startswith("...") or out.count(".") not in (0, 3):
        return f"einsum {equation!r} (A's leading dims not kept in front)"
    if "..." in sa:  # the ellipsis as fresh indices, as many as A's dims it spans
        spare = [c for c in string.ascii_uppercase if c not in sa + sb + out]
        lead = "".join(spare[:max(0, ranks[0] - (len(sa) - 3))])
        sa, out = lead.join(sa.split("...")), lead.join(out.split("..."))
    if (len(sa), len(sb)) != ranks or any(len(set(t)) != len(t) for t in (sa, sb, out)) \
            or not all(c.isalpha() for c in sa + sb + out):
        return f"einsum {equation!r} (indices that do not name each dim of its operands once)"
    shared = [c for c in sa if c in sb and c not in out]
    batch = sa[0] if len(sb) == 3 and len(sa) == 3 and sa[0] == sb[0] == out[:1] else None
    if len(shared) != 1 or len(sb) not in (2, 3) or (len(sb) == 3 and batch is None) or len(sa) < 2:
        return f"einsum {equation!r} (not one matrix product)"
    k = shared[0]
    ta, tb = sa.index(k) == len(sa) - 2, sb.index(k) == len(sb) - 1
    a_rows = sa[:-2] + (sa[-1] if ta else sa[-2])
    b_col = sb[-2] if tb else sb[-1]
    if sa.index(k) < len(sa) - 2 or sb.index(k) < len(sb) - 2 or out != a_rows + b_col:
        return f"einsum {equation!r} (not one matrix product)"
    return ta, tb


def einsum(ix, node):
    """torch.einsum(equation, a, b) (or [a, b]) of the first two inputs that is one matrix product: the matmul."""
    args = list(node.args)
    if len(args) == 2 and isinstance(args[1], (list, tuple)):
        args = [args[0], *args[1]]
    if node.kwargs or len(args) != 3 or not isinstance(args[0], str):
        return ix.refuse("einsum", node)
    a, b = (ix.operand(arg) for arg in args[1:])
    if a is None or b is None:
        return ix.refuse("einsum (of operands other than the forward's inputs)", node)
    shapes = ix.shapes()
    found = einsum_product(args[0], (len(shapes[a.index]), len(shapes[b.index])))
    if isinstance(found, str):
        return ix.refuse(found, node)
    ta, tb = found
    return ix.product(node, Operand(a.index, a.trans != ta), Operand(b.index, b.trans != tb), name="einsum")


RECOGNIZER = Recognizer(modules={nn.Linear: linear_module}, functions={F.linear: linear_function,
                                                                       torch.einsum: einsum, torch.addmm: addmm})
