"""How analyze.py's interpreter reads attention written by hand over the forward's first three inputs q, k, v:
softmax(q @ k^T * scale, dim=-1) @ v, k transposed in forward or passed as k^T, the scores maybe filled with -inf
past the diagonal by a causal mask held as a boolean buffer (masked_fill). A mixin of the interpreter, as
analyze_families.py is. (A call of
F.scaled_dot_product_attention is the attention family's to read: families/attention/recognize.py.)

The hand-written form is read piece by piece, each piece a pending value (values.py) that its consumer decides:
q @ k^T (k's last two dims swapped) is Scores; a scale on the scores, or on q before the product, multiplies them
by a number or by a power of a size read from an input (math.sqrt(q.shape[-1]), q.size(-1) ** -0.5, ...);
softmax over the last dim makes Probs, and Probs @ v is the attention. The scale must be unambiguous: a number,
or exactly 1/sqrt(E) (E: the last size of q and k). Anything else realizes the pieces as the ops they are
(a matmul, a softmax, ...), so what is covered of a larger forward is still listed.
"""

from __future__ import annotations

import math
import operator
from dataclasses import replace

import torch
from torch import fx

from kernelcraft.propose.builtin import spellings as sp
from kernelcraft.propose.builtin.values import X, Attr, Ew, Operand, Probs, ScaledQ, Scores, Shape, SizePow

class AttentionOps:
    # -- sizes read from the inputs, for a scale --------------------------------------------------------
    def size_of(self, node: fx.Node):
        """input.shape / input.size() (a Shape), one size of an input (a SizePow), math.sqrt of a size; else None."""
        args = node.args
        if node.op == "call_function" and node.target is getattr and len(args) == 2 and args[1] == "shape" \
                and args[0] in self.inputs:
            return Shape(self.inputs[args[0]])
        if node.op == "call_method" and node.target == "size" and args and args[0] in self.inputs:
            dims = list(args[1:]) + ([node.kwargs["dim"]] if "dim" in node.kwargs else [])
            if set(node.kwargs) - {"dim"} or len(dims) > 1:
                return None
            return self.size(self.inputs[args[0]], dims[0]) if dims else Shape(self.inputs[args[0]])
        if node.op == "call_function" and node.target is operator.getitem and len(args) == 2 \
                and isinstance(self.value(args[0]), Shape):
            return self.size(self.value(args[0]).index, args[1])
        if node.op == "call_function" and node.target is math.sqrt and len(args) == 1 \
                and isinstance(v := self.value(args[0]), SizePow):
            return replace(v, power=v.power * 0.5, coef=math.sqrt(v.coef))
        return None

    def size(self, index: int, dim) -> SizePow | None:
        shapes = self.shapes()
        shape = shapes[index] if index < len(shapes) else None
        if shape is None or type(dim) is not int or not -len(shape) <= dim < len(shape):
            return None
        return SizePow(index, dim % len(shape))

    def is_head_dim(self, v: SizePow) -> bool:
        """v is a power of E, the last size of q or of k."""
        shapes = self.shapes()
        return v.index in (0, 1) and v.dim == len(shapes[v.index]) - 1

    # -- the scale, on sizes, on q, on the scores ---------------------------------------------------------
    def scale_binary(self, kind: str, a, b, node: fx.Node):
        """a (mul|div) b where one side is a size, a scaled q or the scores: the arithmetic of a scale."""
        def factor(v):  # (coef, size, power) of a number or a size
            if sp.num(v) is not None:
                return sp.num(v), None, 0.0
            return (v.coef, (v.index, v.dim), v.power) if isinstance(v, SizePow) else None

        def scaled(v):  # (const, epow) of q (scaled), or of the scores
            if isinstance(v, (ScaledQ, Scores)):
                return v.const, v.epow
            return self.q_scale(v)

        fa, fb = factor(a), factor(b)
        if kind in ("mul", "div") and fa and fb and (fa[1] is None or fb[1] is None or fa[1] == fb[1]):
            sign = 1.0 if kind == "mul" else -1.0  # sizes times or over numbers, or over the same size
            coef = fa[0] * fb[0] if kind == "mul" else fa[0] / fb[0] if fb[0] else None
            if coef is not None:
                index, dim = fa[1] or fb[1]
                return SizePow(index, dim, fa[2] + sign * fb[2], coef)
        for target, f, ok in ((a, fb, kind in ("mul", "div")), (b, fa, kind == "mul")):
            s = scaled(target) if ok and f else None
            size = SizePow(*f[1], 1.0) if s and f[1] else None
            if s is None or (size is not None and not self.is_head_dim(size)) or (kind == "div" and not f[0]):
                continue
            const = s[0] * f[0] if kind == "mul" else s[0] / f[0]
            epow = s[1] + f[2] if kind == "mul" else s[1] - f[2]
            return replace(target, const=const, epow=epow) if isinstance(target, Scores) else ScaledQ(const, epow)
        return self.refuse(kind, node)

    def q_scale(self, v) -> tuple[float, float] | None:
        """(const, epow) when v is q times const * E ** epow: q itself, q times or over numbers, a ScaledQ."""
        if isinstance(v, ScaledQ):
            return v.const, v.epow
        if not isinstance(v, Ew) or v.base != X or not all(s[0] in ("mul", "div") for s in v.steps):
            return None
        const = 1.0
        for name, c in v.steps:
            if name == "div" and not c:
                return None
            const = const * c if name == "mul" else const / c
        return const, 0.0

    # -- the products --------------------------------------------------------------------------------------
    def k_shape(self, k_t: bool = False) -> tuple | None:
        """k's shape (..., S, E): the second input's, its last two dims swapped where it is passed as k^T."""
        shapes = self.shapes()
        k = shapes[1] if len(shapes) > 1 else None
        return None if k is None or len(k) < 2 else (*k[:-2], k[-1], k[-2]) if k_t else tuple(k)

    def qk_shapes_ok(self, k_t: bool = False) -> bool:
        """q (..., L, E) and k (..., S, E) with the same leading dims."""
        shapes = self.shapes()
        if len(shapes) < 2 or None in shapes[:2]:
            return False
        q, k = shapes[0], self.k_shape(k_t)
        return k is not None and len(q) == len(k) >= 2 and tuple(q[:-2]) == k[:-2] and q[-1] == k[-1]

    def scores(self, node: fx.Node, a: Operand | None, b: Operand | None) -> Scores | None:
        """q @ k^T of the first two inputs (q maybe scaled; k transposed in forward, or passed as k^T), pending;
        None when the product is not that."""
        s = (1.0, 0.0) if a == Operand(0, False) else self.q_scale(self.value(node.args[0])) if a is None else None
        # k as passed is an attention's k^T only where the product feeds a softmax: any other a @ b stays the plain
        # product it is, for every consumer (a mask, a tensor operand) that reads products
        k_t = b == Operand(1, False) and _feeds_softmax(node)
        if s is None or b != Operand(1, True) and not k_t or not self.qk_shapes_ok(k_t):
            return None
        return Scores(*s, k_t=k_t)

    def masked_scores(self, a, p: dict, node: fx.Node):
        """scores.masked_fill(mask, -inf) with `mask` a boolean buffer that is True exactly past each query's
        diagonal (ones(L, S).triu(1), leading dims of size one): the scores of a causal attention (the kernel
        skips those keys, and reads no mask). Any other masked_fill is not covered."""
        mask = self.value(p["mask"])
        if not (isinstance(a, Scores) and not a.causal and sp.num(p["value"]) == -math.inf and isinstance(mask, Attr)):
            return self.refuse("masked_fill", node)
        found = dict(self.model.named_buffers()).get(mask.path)
        q, k = self.shapes()[0], self.k_shape(a.k_t)
        if found is None or found.dtype != torch.bool or found.dim() < 2 or any(d != 1 for d in found.shape[:-2]):
            return self.refuse("masked_fill (a mask that is not causal)", node)
        causal = torch.ones(q[-2], k[-2], dtype=torch.bool).triu(1)
        if tuple(found.shape[-2:]) != tuple(causal.shape) or not torch.equal(found.reshape(causal.shape).cpu(), causal):
            return self.refuse("masked_fill (a mask that is not causal)", node)
        return replace(a, causal=True)

    def softmax_of_scores(self, scores: Scores, p: dict) -> Probs | None:
        dim = p["dim"]
        return Probs(scores) if type(dim) is int and dim in (-1, len(self.shapes()[0]) - 1) else None

    def attention_product(self, node: fx.Node, probs: Probs):
        """Probs @ v, v the third input as passed (..., S, Ev): the attention."""
        if self.operand(node.args[1]) != Operand(2, False) or not self.qkv_shapes_ok(probs.scores.k_t):
            return self.refuse("matmul", node)
        s = probs.scores
        if s.epow == 0.0:
            scale, scale_attr = s.const, self.attr_name(s.const, float)
        elif s.epow == -0.5 and s.const == 1.0:
            scale, scale_attr = None, None  # 1/sqrt(E), read from q at run time
        else:
            return self.refuse("attention scale (neither a number nor 1/sqrt of the head size)", node)
        return self.emit("attention", "x", causal=s.causal, scale=scale, scale_attr=scale_attr,
                         **({"k_t": True} if s.k_t else {}))

    def qkv_shapes_ok(self, k_t: bool = False) -> bool:
        """q (..., L, E), k (..., S, E), v (..., S, Ev) of the first three inputs, with the same leading dims."""
        shapes = self.shapes()
        if len(shapes) < 3 or shapes[2] is None:
            return False
        if not self.qk_shapes_ok(k_t):
            return False
        k, v = self.k_shape(k_t), tuple(shapes[2])
        return len(v) == len(k) and v[:-2] == k[:-2] and v[-2] == k[-2]

    def realize_scores(self, v: Scores) -> Ew | None:
        """Scores that are no attention's: the plain matmul they are (2-D or batched 3-D), times a number."""
        shapes = self.shapes()
        q, k = shapes[0], shapes[1]
        if v.causal:
            self.note("masked_fill")
            return None
        if v.epow != 0.0 or not (len(q) == 2 or (len(q) == 3 and q[0] == k[0])):
            self.note("matmul")
            return None
        if v not in self.emitted_scores:  # scores used twice are one matmul
            self.emitted_scores[v] = self.emit("matmul", "x", **self.matmul_detail(Operand(0, False),
                                                                                 Operand(1, not v.k_t)))
        out = self.emitted_scores[v]
        return replace(out, steps=(("mul", v.const),)) if v.const != 1.0 else out

    def realize_probs(self, v: Probs) -> Ew | None:
        if not isinstance(chain := self.realize(v.scores), Ew):
            self.note("softmax")
            return None
        return self.emit("softmax", self.emit_chain(chain).base, dim=-1)


_SCORE_STEPS = {"mul", "div", "truediv", "masked_fill", "clone", "contiguous"}  # what lies between scores and softmax


def _feeds_softmax(node: fx.Node) -> bool:
    """`node`'s value reaches a softmax through scaling, masking or copying alone (an attention's scores would)."""
    seen, todo = set(), list(node.users)
    while todo:
        user = todo.pop()
        if user in seen:
            continue
        seen.add(user)
        name = user.target if isinstance(user.target, str) else getattr(user.target, "__name__", "")
        if name == "softmax":
            return True
        if name in _SCORE_STEPS:
            todo.extend(user.users)
    return False
