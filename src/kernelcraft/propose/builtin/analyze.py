"""Read a reference into plan.py's IR: instantiate its Model, trace it with torch.fx, and interpret the graph.

The interpretation is abstract: each node gets a value saying what it is in terms of the forward's inputs
(a chain of pointwise steps over an input or over a recognized op's result, a pending rmsnorm piece, a
parameter, or unknown). Ops are emitted only when a value is consumed by something that is not pointwise,
so a chain such as `torch.relu(x * 2.0) - 1.0` becomes one elementwise Op, and the pieces of an rmsnorm
written by hand (square, mean, + eps, rsqrt, products in any order) become one rmsnorm Op. Each Op names the
value it reads (its src), so a forward of several ops is a chain (chain.py renders it); a product or sum of two
tensors keeps the chain over the latest op pending and takes the other value as a tensor operand (a step), or,
for x (op) f(x), the chain's own earlier value (plan.py's ("step", k)), and for g(x) (op) f(x), g a chain of scalar
steps sharing f's first k, that value with g's other steps applied beside the chain (("step", k, branch): plan.Own).
Pointwise steps after a conv, linear, matmul or norm fold into its epilogue, a batchnorm or pooling after a
conv into the conv, but only while no value still to be read needs the op's result as it was (foldable). Once the
forward is read, consecutive elementwise ops merge into one (plan.merge_elementwise), an elementwise op's leading
steps fold into the op it reads where nothing else reads that op's result (fold_elementwise), and an elementwise op
read only by a reduction becomes that reduction's prologue where its kernel reads the operands in place
(fold_prologues).

Mixins of the interpreter read the folding of epilogues into ops (analyze_families.py), attention
(analyze_attention.py), matmul operands, the tensor operands of pointwise steps and free reshapes
(analyze_operands.py), tensors forward makes or measures (analyze_tensors.py) and float casts (analyze_casts.py); the families read their own ops (families/*/recognize.py, recognize.py);
values.py holds the abstract values, spellings.py torch's spellings of the core's ops, and scalars.py makes the
numbers forward reads from the module run-time reads. New recognizers go to a family or a mixin, not here.
"""

from __future__ import annotations

import ast
import inspect
import operator
import re
from dataclasses import replace

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import fx

from kernelcraft.propose.builtin import recognize, registry, scalars, spellings as sp
from kernelcraft.propose.builtin.analyze_attention import AttentionOps
from kernelcraft.propose.builtin.analyze_families import FamilyOps
from kernelcraft.propose.builtin.analyze_operands import OperandOps
from kernelcraft.propose.builtin.analyze_casts import CastOps, output_dtype
from kernelcraft.propose.builtin.analyze_tensors import TensorOps
from kernelcraft.propose.builtin.compose import parse
from kernelcraft.propose.builtin.plan import Analysis, Op, merge_elementwise, needed_ops, operand_refs, shift
from kernelcraft.propose.builtin.untraceable import untraceable
from kernelcraft.propose.builtin.values import (UNKNOWN, X, Attr, AttrT, AttrView, Device, Ew, Flipped, LogSoftmaxIn,
                                                MeanSq, Operand, Pair, Pending, Probs, Prod, ScaledQ, Scores, Shape,
                                                SizePow, TensorShape, TensorSize)

def _forward_source(source: str) -> str:
    try:
        tree = parse(source)
    except SyntaxError:
        return source
    forward = next((fn for cls in tree.body if isinstance(cls, ast.ClassDef) and cls.name == "Model" for fn in cls.body
                    if isinstance(fn, ast.FunctionDef) and fn.name == "forward"), None)
    return (ast.get_source_segment(source, forward) or source) if forward else source


def analyze(problem) -> Analysis:
    """What `problem`'s reference computes over its first input, as plan.py's Ops, or why not."""
    model = None
    try:
        module = problem.load(small=True)  # SMALL_SIZES, else sizes derived for a CPU: never full KernelBench sizes
        model = module.Model(*module.get_init_inputs())
        graph = fx.symbolic_trace(model)
    except Exception as exc:  # unimportable, failing constructor, or data-dependent control flow
        n = len(inspect.signature(model.forward).parameters) if model is not None else 1
        return Analysis([], n_inputs=n, error=f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}",
                        untraceable=untraceable(exc) if model is not None else None)  # model built: fx failed

    def input_meta() -> list:  # (shape, dtype) per input; asked only when a matmul or a transpose is met
        try:
            return [(tuple(t.shape), str(t.dtype).removeprefix("torch.")) if isinstance(t, torch.Tensor) else None
                    for t in module.get_inputs()]
        except Exception:
            return []
    try:
        return registry.checked(_Interpreter(graph, model, _forward_source(problem.source), input_meta,
                                             lambda: output_dtype(model, module.get_inputs)).run())
    except Exception as exc:  # a graph shape this interpreter did not foresee: say so, never raise
        return Analysis([], error=f"analysis failed: {type(exc).__name__}: {exc}")


class _Interpreter(FamilyOps, AttentionOps, OperandOps, TensorOps, CastOps):
    def __init__(self, gm: fx.GraphModule, model: nn.Module, forward_src: str, input_meta=lambda: [],
                 output_dtype=lambda: None):
        self.gm, self.model, self.forward_src = gm, model, forward_src
        self._input_meta, self._meta = input_meta, None
        self._output_dtype, self.casts = output_dtype, False
        self.inputs: dict[fx.Node, int] = {}  # placeholder -> its index
        self.ops: list[Op] = []
        self.unsupported: list[str] = []
        self.env: dict[fx.Node, object] = {}
        self.emitted: dict[Ew, int] = {}  # a chain used twice is emitted once
        self.emitted_scores: dict[Scores, Ew] = {}  # q @ k^T realized as a matmul, once
        self.order: dict[fx.Node, int] = {}  # node -> its position in the graph
        self.position = 0  # the node being interpreted
        self.no_fold = False  # set while an operand is emitted mid-expression (see binary)

    def run(self) -> Analysis:
        n_inputs = 0
        self.order = {node: i for i, node in enumerate(self.gm.graph.nodes)}
        for node in self.gm.graph.nodes:
            self.position = self.order[node]
            if node.op == "placeholder":
                self.env[node] = Ew(X) if n_inputs == 0 else Ew(("input", n_inputs))
                self.inputs[node] = n_inputs
                n_inputs += 1
            elif node.op == "get_attr":
                self.env[node] = self.get_attr(node)
            elif node.op == "output":
                out = node.args[0]
                if not isinstance(out, fx.Node):
                    self.refuse("several outputs" if isinstance(out, (tuple, list, dict)) else "constant output",
                                node)
                elif isinstance(chain := self.realize(self.env[out]), Ew):
                    needed = needed_ops(self.ops, self.emit_chain(chain).base)
                    self.ops = self.fold_prologues(self.fold_elementwise(merge_elementwise(needed)))
                elif isinstance(self.env[out], Attr):
                    self.note("returns a parameter")
            else:
                self.env[node] = self.call(node)
        for name in scalars.resolve(self.ops, self.model, self.forward_src, self.number_attr):
            self.note(f"a number computed from self.{name}")
        self.check_casts()
        return Analysis(self.ops, self.unsupported, n_inputs)

    # -- emitting ---------------------------------------------------------------------------------------
    def emit(self, kind: str, src, **detail) -> Ew:
        """Append an op reading `src` (a chain's base: "x", ("input", i) or an op's index); its result's value."""
        for ref in [src, *operand_refs(detail.get("steps") or [])]:  # int64 indices: dtype rules not followed
            if isinstance(ref, int) and self.ops[ref].kind == "argreduce":
                self.note(f"{kind} of {self.ops[ref].detail['op']} indices")
        self.ops.append(Op(kind, detail, src))
        return Ew(len(self.ops) - 1)

    def emit_chain(self, chain: Ew) -> Ew:
        """The chain as a value with no pending steps: its leading plain steps folded into the epilogue of the op
        it reads where that op applies them, the rest an elementwise op (emitted once per chain)."""
        if not chain.steps or chain in self.emitted:
            return Ew(self.emitted[chain]) if chain.steps else chain
        folded = self.fold_epilogue(chain)
        rest = Ew(chain.base, shift(chain.steps[folded:], -folded))
        if not rest.steps:
            return rest
        if rest not in self.emitted:
            self.emitted[rest] = self.emit("elementwise", rest.base, steps=[list(s) for s in rest.steps]).base
        return Ew(self.emitted[rest])

    def realize(self, v) -> Ew | None:
        """v as a chain over x or an emitted op, emitting the pending pieces it stands for; None if it is not."""
        if isinstance(v, Ew):
            return v
        if isinstance(v, Pending):  # a family's pending value (values.Pending)
            return v.realize(self)
        if isinstance(v, MeanSq):
            src = self.emit_chain(replace(v.src, steps=v.src.steps + (("square",),))).base
            mean = self.emit("reduce", src, op="mean", dim=v.dim, dim_attr=self.attr_name(v.dim, int), keepdim=True)
            return replace(mean, steps=v.post)
        if isinstance(v, Prod) and v.src is not None and v.src == v.inv_src:
            src = self.emit_chain(v.src).base
            eps = {"eps": v.eps, "eps_attr": self.attr_name(v.eps, float)}
            if v.dim == -1:
                return self.emit("rmsnorm", src, **eps, weight=v.weight)
            # over another dim: the weight, if any, a tensor step after it (it broadcasts by torch's rules)
            norm = self.emit("rmsnorm", src, **eps, weight=None, dim=v.dim, dim_attr=self.attr_name(v.dim, int))
            return replace(norm, steps=(("tmul", ("attr", v.weight)),)) if v.weight else norm
        if isinstance(v, Prod) and isinstance(chain := self.as_chain(v), Ew):
            return chain
        if isinstance(v, Scores):
            return self.realize_scores(v)
        if isinstance(v, Probs):
            return self.realize_probs(v)
        if isinstance(v, (Prod, Pair)):
            self.note("mul" if isinstance(v, Prod) else f"{v.op} with indices")
        if isinstance(v, (Shape, SizePow)):
            self.note("shape")
        if isinstance(v, ScaledQ):
            self.note("scale by a size")
        if isinstance(v, Operand):
            self.note("transpose")
        if isinstance(v, AttrT):
            self.note("transpose of a parameter")
        if isinstance(v, Device):
            self.note("device")
        if isinstance(v, (TensorSize, TensorShape)):
            self.note("size")
        if isinstance(v, Flipped):  # read by something other than a scan along its dim or a flip back
            self.note("flip")
        return None

    def note(self, name: str) -> None:
        if name not in self.unsupported:
            self.unsupported.append(name)

    def refuse(self, name: str, node: fx.Node):
        """An op the IR does not cover: emit what feeds it, record its name, and lose track of its result."""
        def feed(n: fx.Node) -> fx.Node:
            if isinstance(chain := self.realize(self.env[n]), Ew):
                self.emit_chain(chain)
            return n

        fx.node.map_arg((node.args, node.kwargs), feed)
        self.note(name)
        return UNKNOWN

    def attr_name(self, value, typ) -> str | None:
        """The model attribute holding `value`, when forward reads it as self.<name> (fx baked the value in)."""
        return next((name for name, v in vars(self.model).items() if not name.startswith("_") and type(v) is typ
                     and v == value and re.search(rf"\bself\.{name}\b", self.forward_src)), None)

    def number_attr(self, value) -> str | None:
        return self.attr_name(value, float) or self.attr_name(value, int)

    # -- interpreting one node --------------------------------------------------------------------------
    def call(self, node: fx.Node):
        recognizers = registry.recognizers()  # the families' own ops first (recognize.py)
        if node.op == "call_module":
            mod = self.gm.get_submodule(node.target)
            if (claimed := recognize.module_handler(recognizers, mod)) is not None:
                return claimed(self, node, mod)
        elif (claimed := recognize.handler(recognizers, node)) is not None:
            return claimed(self, node)
        if node.op == "call_function" and node.target is operator.getitem and len(node.args) == 2 \
                and isinstance(pending := self.value(node.args[0]), Pending):
            return pending.item(self, node, node.args[1])  # a subscript of a family's pending value
        if (found := self.casted(node)) is not None:
            return found
        if self.is_matmul(node):
            return self.matmul(node)
        if (found := self.number_tensor(node)) is not None:
            return found
        if (found := self.tensor_size(node)) is not None:
            return found
        if node.op == "call_function" and node.target is torch.cat:
            return self.cat(node)
        if (found := self.size_of(node)) is not None:
            return found
        if (found := self.transposed(node)) is not None:
            return found
        if (found := self.attr_view(node)) is not None:
            return found
        if (detail := self.reshape(node)) is not None:
            return self.view(node, detail) if detail else self.refuse("view", node)
        if node.op == "call_module":
            mod = self.gm.get_submodule(node.target)
            name = type(mod).__name__.lower()
            if isinstance(mod, nn.LayerNorm) and len(node.args) == 1 and not node.kwargs:
                weight = f"{node.target}.weight" if mod.weight is not None else None
                bias = f"{node.target}.bias" if mod.bias is not None else None
                return self.layernorm(node, len(mod.normalized_shape), mod.eps, weight, bias)
            found = sp.module_op(mod)
            if found is None or len(node.args) != 1 or node.kwargs:
                return self.refuse(name, node)
            kind, params = found
        elif node.target in (operator.getitem, getattr) and isinstance(self.value(node.args[0]), Pair):
            pair, which = self.env[node.args[0]], node.args[1]
            if which in (0, "values"):
                src = self.emit_chain(pair.src).base
                return self.emit("reduce", src, op=pair.op, dim=pair.dim, dim_attr=self.attr_name(pair.dim, int),
                                 keepdim=pair.keepdim)
            src = self.emit_chain(pair.src).base  # only the indices are used: an argmax/argmin
            return self.emit("argreduce", src, op=f"arg{pair.op}", dim=pair.dim, dim_attr=self.attr_name(pair.dim, int),
                             keepdim=pair.keepdim)
        else:
            table = sp.METHODS if node.op == "call_method" else sp.FUNCS
            name = node.target if node.op == "call_method" else getattr(node.target, "__name__", str(node.target))
            if node.target == getattr:
                name = str(node.args[1])
            kind = table.get(node.target)
            params = sp.bind(kind, node.args[1:], node.kwargs) if kind and node.args else None
            if params is None:
                return self.refuse(name, node)
        return self.apply(kind, name, node, params)

    def apply(self, kind: str, name: str, node: fx.Node, p: dict):
        a = self.value(node.args[0])
        if kind == "identity":
            return a
        if kind in ("min", "max") and self.is_operand(p["dim"]):  # torch.min(x, other): elementwise
            kind, p = {"min": "minimum", "max": "maximum"}[kind], {"other": p["dim"]}
        if kind in ("minimum", "maximum"):
            return self.binary(kind, a, self.value(p["other"]), node)
        if kind in ("add", "sub", "mul", "div"):
            return self.binary(kind, a, self.value(p["other"]), node)
        if kind == "log_softmax" and isinstance(p["dim"], int) and isinstance(node.args[0], fx.Node) \
                and self.inputs.get(node.args[0]) in (0, 1) \
                and node.users and all(u.target is F.kl_div for u in node.users):
            return LogSoftmaxIn(self.inputs[node.args[0]], p["dim"])  # maybe a kl_div of logits: its consumer decides
        if kind == "masked_fill":  # only a causal mask on an attention's scores (analyze_attention.py)
            return self.masked_scores(a, p, node)
        if kind == "softmax" and isinstance(a, Scores) and (probs := self.softmax_of_scores(a, p)) is not None:
            return probs  # maybe an attention's: decided by the product that follows
        if kind == "pow" and isinstance(a, SizePow) and sp.num(p["exponent"]) is not None:
            e = sp.num(p["exponent"])
            return replace(a, power=a.power * e, coef=a.coef ** e)
        if kind in ("softmax", "log_softmax"):
            if not isinstance(p["dim"], int) or not isinstance(chain := self.realize(a), Ew):
                return self.refuse(name, node)
            return self.emit(kind, self.emit_chain(chain).base, dim=p["dim"])
        if kind == "layer_norm":
            shape, w, b = p["normalized_shape"], self.value(p["weight"]), self.value(p["bias"])
            shape = (shape,) if isinstance(shape, int) else shape
            if (not isinstance(shape, (tuple, list, torch.Size)) or sp.num(p["eps"]) is None
                    or not all(v is None or isinstance(v, Attr) for v in (w, b))):
                return self.refuse(name, node)
            return self.layernorm(node, len(shape), float(p["eps"]), w and w.path, b and b.path)
        if kind in sp.REDUCE:
            return self.reduce(kind, name, a, p, node)
        if "pool" in kind:
            return self.pool(kind, name, a, p, node)
        return self.apply_step(a, sp.step(kind, p), name, node)

    def value(self, arg):
        return self.env[arg] if isinstance(arg, fx.Node) else arg

    def layernorm(self, node: fx.Node, ndim: int, eps: float, weight, bias):
        if not isinstance(chain := self.realize(self.value(node.args[0])), Ew):
            return self.refuse("layernorm", node)
        return self.emit("layernorm", self.emit_chain(chain).base, ndim=ndim, eps=float(eps), weight=weight, bias=bias)

    def reduce(self, kind: str, name: str, a, p: dict, node: fx.Node):
        dim = sp.dim_list(p["dim"])  # one dim as a list: that dim; () or []: all of them (None); several: sorted
        if isinstance(dim, fx.Node) or not sp.reducible_dims(kind, dim):
            return self.refuse(f"{name} over several dims" if isinstance(dim, list) else name, node)
        if kind == "mean" and type(dim) is int and p["keepdim"] is True and isinstance(a, Ew) \
                and a.steps[-1:] == (("square",),):
            return MeanSq(replace(a, steps=a.steps[:-1]), dim=dim)  # maybe an rmsnorm: decided by its consumers
        if not isinstance(chain := self.realize(a), Ew):
            return self.refuse(name, node)
        if kind in ("max", "min") and dim is not None:  # a (values, indices) pair
            return Pair(chain, kind, dim, bool(p["keepdim"]))
        src = self.emit_chain(chain).base
        dim_attr = self.attr_name(dim, int) if dim is not None else None
        return self.emit("reduce", src, op=sp.REDUCE[kind], dim=dim, dim_attr=dim_attr, keepdim=bool(p["keepdim"]))

    def binary(self, kind: str, a, b, node: fx.Node):
        if any(isinstance(v, (Scores, ScaledQ, SizePow)) for v in (a, b)):
            return self.scale_binary(kind, a, b, node)  # a scale being built, or applied to q or to the scores
        ca, cb = sp.num(a), sp.num(b)
        if kind in ("minimum", "maximum") and (ca is None) != (cb is None):  # with a number: a clamp
            c = ca if cb is None else cb
            step = ("clamp", None, c) if kind == "minimum" else ("clamp", c, None)
            return self.apply_step(a if ca is None else b, step, kind, node)
        if cb is not None and ca is None:  # tensor (op) number
            return self.apply_step(a, (kind, cb), kind, node)
        if ca is not None and cb is None:  # number (op) tensor
            return self.apply_step(b, ({"add": "add", "mul": "mul", "sub": "rsub", "div": "rdiv"}[kind], ca),
                                   kind, node)
        if kind == "mul" and isinstance(a, Ew) and isinstance(b, Ew) and a.base == b.base:
            if a == b:
                return replace(a, steps=a.steps + (("square",),))
            for u, v in ((a, b), (b, a)):  # x * sigmoid(x) is silu
                if v.steps == u.steps + (("sigmoid",),):
                    return replace(u, steps=u.steps + (("silu",),))
        if kind == "mul" and (fa := self.factor(a)) and (fb := self.factor(b)):
            merged = {k: getattr(fa, k) if getattr(fa, k) is not None else getattr(fb, k) for k in
                      ("src", "eps", "inv_src", "weight")}
            merged["dim"] = fa.dim if fa.eps is not None else fb.dim  # the 1/rms factor's
            if all(getattr(fa, k) is None or getattr(fb, k) is None for k in ("src", "eps", "weight")):
                return Prod(**merged)
        if kind == "div" and isinstance(b, MeanSq) and len(b.post) == 2 and b.post[1] in (("sqrt",), ("pow", 0.5)) \
                and b.post[0][0] == "add" and (fa := self.factor(a)) and fa.eps is None:
            return replace(fa, eps=b.post[0][1], inv_src=b.src, dim=b.dim)  # x / sqrt(mean(x^2) + eps)
        return self.tensor_binary(kind, a, b, node)

    @staticmethod
    def as_chain(v):
        """v as a chain (a product of a chain and a parameter: a tensor step), or a parameter; else None."""
        if isinstance(v, Prod) and v.src is not None and v.weight is not None and v.eps is None \
                and v.inv_src is None:
            return replace(v.src, steps=v.src.steps + (("tmul", ("attr", v.weight)),))
        return v if isinstance(v, (Ew, Attr, AttrView)) else None

    def apply_step(self, a, step: tuple | None, name: str, node: fx.Node):
        if isinstance(a, MeanSq) and step:  # + eps, rsqrt, ... on a pending mean of squares
            return replace(a, post=a.post + (step,))
        if step is None or not isinstance(chain := self.realize(a), Ew):
            return self.refuse(name, node)
        return replace(chain, steps=chain.steps + (step,))

    @staticmethod
    def factor(v) -> Prod | None:
        """v as a factor of an rmsnorm product: the input, a weight, 1/rms, or a partial product."""
        if isinstance(v, Prod):
            return v
        if isinstance(v, Ew):
            return Prod(src=v)
        if isinstance(v, Attr):
            return Prod(weight=v.path)
        inverse = ((("rsqrt",),), (("pow", -0.5),), (("sqrt",), ("rdiv", 1.0)))
        if isinstance(v, MeanSq) and v.post[:1] and v.post[0][0] == "add" and v.post[1:] in inverse:
            return Prod(eps=v.post[0][1], inv_src=v.src, dim=v.dim)
        return None

    # -- arg-reductions, scans and pooling over a chain ---------------------------------------------------

