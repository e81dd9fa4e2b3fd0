"""The forward's inputs as matmul operands (A, A.T, A.mT, A.transpose(-2, -1), ...), the matmul of two of them
(or the products of an attention, handed to analyze_attention.py), a tensor operand of a pointwise step (a (op) b
of two tensors: tensor_binary), and free reshapes (flatten / view / reshape
of literal sizes, squeeze / unsqueeze of one dim), and a parameter's transpose read by a matmul (x @ W.T, a
linear). A mixin of analyze.py's interpreter: the methods use its own (inputs, env, value, emit,
refuse, ...)."""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn as nn
from torch import fx

from kernelcraft.propose.builtin import spellings as sp
from kernelcraft.propose.builtin.values import Attr, AttrT, AttrView, Ew, MeanSq, Operand, Pending, Probs, own_value


class OperandOps:
    def shapes(self) -> list:
        return [m[0] if m else None for m in self.inputs_meta()]

    def inputs_meta(self) -> list:
        """(shape, dtype name) per forward input (None where it is no tensor), from the problem's get_inputs."""
        if self._meta is None:
            self._meta = self._input_meta()
        return self._meta

    def matmul_detail(self, a: Operand, b: Operand) -> dict:
        """A matmul op's detail: its operands' transposes, and A's dtype (the kernel's moves depend on it)."""
        meta = self.inputs_meta()
        return {"trans_a": a.trans, "trans_b": b.trans, "dtype": meta[a.index][1]}

    def operand(self, arg) -> Operand | None:
        """arg as (a possibly transposed) forward input of 2 dims or more, or None."""
        if isinstance(arg, fx.Node) and arg in self.inputs:
            index = self.inputs[arg]
            shapes = self.shapes()
            if index < len(shapes) and shapes[index] is not None and len(shapes[index]) >= 2:
                return Operand(index, False)
            return None
        v = self.env.get(arg) if isinstance(arg, fx.Node) else None
        return v if isinstance(v, Operand) else None

    @staticmethod
    def is_matmul(node: fx.Node) -> bool:
        return ((node.op == "call_function" and node.target in sp.MATMUL_FUNCS)
                or (node.op == "call_method" and node.target in sp.MATMUL_METHODS)) and len(node.args) == 2 \
            and not node.kwargs

    def transposed(self, node: fx.Node) -> Operand | None:
        """A.T / A.mT / A.t() / A.transpose(-2, -1) (0, 1 on 2-D) / A.contiguous() of an operand, else None."""
        if node.op not in ("call_function", "call_method") or not node.args:
            return None
        name = node.target if node.op == "call_method" else \
            {getattr: "getattr", torch.transpose: "transpose", torch.t: "t"}.get(node.target)
        if name not in ("getattr", "t", "transpose", "contiguous") or (
                name == "contiguous" and node.args[0] in self.inputs):  # x.contiguous() stays the identity
            return None
        if name in ("getattr", "t") and isinstance(attr := self.value(node.args[0]), Attr) and not node.kwargs \
                and node.args[1:] in ((("T",),) if name == "getattr" else ((),)) and self.param_dims(attr.path) == 2:
            return AttrT(attr.path)  # W.T: a linear's weight, if a matmul reads it
        src = self.operand(node.args[0])
        if src is None:
            return None
        ndim = len(self.shapes()[src.index])
        rest, flip = node.args[1:], None
        if name == "getattr" and rest in (("T",), ("mT",)) and not node.kwargs:
            flip = rest == ("mT",) or ndim == 2
        elif name == "t" and not rest and not node.kwargs and ndim == 2:
            flip = True
        elif name == "transpose" and not node.kwargs and len(rest) == 2 and all(isinstance(d, int) for d in rest):
            dims = sorted(d % ndim for d in rest)
            flip = dims == [ndim - 2, ndim - 1]
        elif name == "contiguous" and not rest and not node.kwargs:
            return src
        return Operand(src.index, not src.trans) if flip else None

    def param_dims(self, path: str) -> int | None:
        """The number of dims of the model's parameter or buffer at `path` (None: none there)."""
        found = dict(self.model.named_parameters()).get(path)
        found = found if found is not None else dict(self.model.named_buffers()).get(path)
        return found.dim() if found is not None else None

    def reshape(self, node: fx.Node) -> dict | None:
        """A flatten / view / reshape as a view op's detail ({} when its sizes are not literal ints); None if the
        node is none of them."""
        def ints(v) -> list | None:
            v = list(v) if isinstance(v, (tuple, list, torch.Size)) else None
            return v if v is not None and all(type(i) is int for i in v) else None

        if node.op == "call_module" and type(mod := self.gm.get_submodule(node.target)) is nn.Flatten:
            return {"flatten": [mod.start_dim, mod.end_dim]} if len(node.args) == 1 and not node.kwargs else {}
        name = node.target if node.op == "call_method" else \
            {torch.flatten: "flatten", torch.reshape: "reshape", torch.squeeze: "squeeze",
             torch.unsqueeze: "unsqueeze"}.get(node.target) if node.op == "call_function" else None
        if name not in ("flatten", "view", "reshape", "squeeze", "unsqueeze") or not node.args:
            return None
        rest = node.args[1:]
        if name in ("squeeze", "unsqueeze"):  # one dim (squeeze: or every dim of size 1)
            given = dict(zip(("dim",), rest), **node.kwargs)
            dim = given.get("dim")
            ok = len(rest) <= 1 and not set(given) - {"dim"} and (type(dim) is int or (dim is None and name == "squeeze"))
            return {name: dim} if ok else {}
        if name == "flatten":
            given = dict(zip(("start_dim", "end_dim"), rest), **node.kwargs)
            dims = [given.get("start_dim", 0), given.get("end_dim", -1)]
            ok = len(rest) <= 2 and not set(given) - {"start_dim", "end_dim"} and ints(dims) is not None
            return {"flatten": dims} if ok else {}
        if node.kwargs.keys() - {"shape"} or (node.kwargs and rest):
            return {}
        given = node.kwargs["shape"] if "shape" in node.kwargs else \
            rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
        shape = [self.size_entry(self.value(v)) for v in given] if isinstance(given, (tuple, list)) else [None]
        return {"shape": shape} if None not in shape and sum(i == -1 for i in shape) <= 1 else {}

    def matmul(self, node: fx.Node):
        if isinstance(probs := self.value(node.args[0]), Probs):
            return self.attention_product(node, probs)
        if isinstance(w := self.value(node.args[1]), AttrT):  # x @ W.T: a linear without bias
            if not isinstance(chain := self.realize(self.value(node.args[0])), Ew):
                return self.refuse("matmul", node)
            return self.emit("linear", self.emit_chain(chain).base, weight=w.path, bias=None, steps=[])
        if isinstance(w, Attr) and self.param_dims(w.path) == 2 and node.target not in (torch.bmm, "bmm"):
            # x @ W with W (K, N): a linear whose weight is held transposed
            if not isinstance(chain := self.realize(self.value(node.args[0])), Ew):
                return self.refuse("matmul", node)
            return self.emit("linear", self.emit_chain(chain).base, weight=w.path, bias=None, steps=[],
                             weight_kn=True)
        a, b = (self.operand(arg) for arg in node.args)
        if (scores := self.scores(node, a, b)) is not None:
            return scores  # q @ k^T: an attention's scores, or a matmul, decided by what consumes them
        broadcasts = node.target not in (torch.mm, torch.bmm, "mm", "bmm")  # matmul and @ share a 2-D B
        return self.product(node, a, b, broadcasts)

    def product(self, node: fx.Node, a: Operand | None, b: Operand | None, broadcasts: bool = True,
                name: str = "matmul"):
        """The matmul op(A) @ op(B) of the first two inputs: both 2-D, both 3-D with equal batch, or (where the
        spelling broadcasts, as torch.matmul does) A of 3 dims or more times a 2-D B, one GEMM over A's leading
        dims; else refused (as `name`)."""
        shapes = self.shapes() if a and b else []
        ok = a is not None and b is not None and (a.index, b.index) == (0, 1)
        na, nb = (len(shapes[0]), len(shapes[1])) if ok else (0, 0)
        if not (ok and ((na == nb == 2) or (na == nb == 3 and shapes[0][0] == shapes[1][0])
                        or (broadcasts and na >= 3 and nb == 2))):
            return self.refuse(name, node)
        return self.emit("matmul", "x", **self.matmul_detail(a, b))

    def tensor_binary(self, kind: str, a, b, node: fx.Node):
        """a (op) b of two tensors: the chain over the latest op stays pending and takes the other, as it is (a
        value with no pending steps, a parameter, or the chain's own value at an earlier step), as a tensor step;
        broadcast by torch's rules."""
        ca, cb = (self.realize(v) if isinstance(v, (MeanSq, Pending)) else self.as_chain(v) for v in (a, b))
        params = (Attr, AttrView)
        if ca is None or cb is None or (isinstance(ca, params) and isinstance(cb, params)):
            return self.refuse(kind, node)

        def rank(c) -> int:  # later ops first; parameters never lead
            return -2 if isinstance(c, params) else c.base if isinstance(c.base, int) else -1

        swap = rank(cb) > rank(ca) or (rank(cb) == rank(ca) and cb.steps and not ca.steps)
        main, other = (cb, ca) if swap else (ca, cb)
        main, other, swap, own = own_order(main, other, swap)
        if isinstance(other, Attr):
            ref = ("attr", other.path)
        elif isinstance(other, AttrView):
            ref = other.ref
        elif own is not None:
            ref = own  # main's own value after k steps (and a scalar branch of it): nothing to emit
        else:
            self.no_fold, was = True, self.no_fold  # folding now could change what `main` reads
            try:
                ref = self.emit_chain(other).base
            finally:
                self.no_fold = was
        step = {"add": "tadd", "mul": "tmul", "sub": "trsub" if swap else "tsub",
                "div": "trdiv" if swap else "tdiv", "minimum": "tmin", "maximum": "tmax"}[kind]
        return replace(main, steps=main.steps + ((step, ref),))


def own_order(main, other, swap: bool) -> tuple:
    """(main, other, swap, ref): which side of a (op) b goes on reading the other as its own value (values.own_value),
    and how (ref; None: neither can). x (op) f(x) first, either way round (f(x) goes on, reading x as its own
    value); else a scalar branch of either (0.5 * x * f(x): f(x) goes on, 0.5 * x computed beside it), main first."""
    orders = [(main, other, swap, own_value(main, other)), (other, main, not swap, own_value(other, main))]
    for prefix in (True, False):
        for m, o, s, ref in orders:
            if ref is not None and (not ref.branch) == prefix:
                return m, o, s, ref
    return main, other, swap, None
