"""Read a reference into plan.py's IR: instantiate its Model, trace it with torch.fx, and interpret the graph.

The interpretation is abstract: each node gets a value saying what it is in terms of the forward's first
input x (a chain of pointwise steps over x or over a recognized op's result, a pending rmsnorm piece, a
parameter, or unknown). Ops are emitted only when a value is consumed by something that is not pointwise,
so a chain such as `torch.relu(x * 2.0) - 1.0` becomes one elementwise Op, and the pieces of an rmsnorm
written by hand (square, mean, + eps, rsqrt, products in any order) become one rmsnorm Op.

About 450 lines, over the 400 aimed at: one abstract interpreter whose tables of spellings (functions,
methods, modules and their torch defaults) are kept spelled out; splitting them from the walk that uses
them would only scatter one mapping over two files.
"""

from __future__ import annotations

import ast
import inspect
import operator
import re
from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import fx

from kernelcraft.propose.builtin.plan import Analysis, Op

X = "x"  # the base of chains over the first input; an int base is the index of an emitted Op


@dataclass(frozen=True)
class Ew:  # steps applied pointwise to base (no steps: the base itself)
    base: object
    steps: tuple = ()


@dataclass(frozen=True)
class MeanSq:  # post(mean(src**2, dim=-1, keepdim=True)): kept pending, it may be an rmsnorm denominator
    src: Ew
    post: tuple = ()


@dataclass(frozen=True)
class Prod:  # a product of rmsnorm factors: the input (src), 1/rms (eps, over inv_src), a weight
    src: Ew | None = None
    eps: float | None = None
    inv_src: Ew | None = None
    weight: str | None = None


@dataclass(frozen=True)
class Pair:  # torch.max/min(x, dim): (values, indices), resolved by the getitem/.values that follows
    src: Ew
    op: str
    dim: int
    keepdim: bool


@dataclass(frozen=True)
class Operand:  # a transposed view (last two dims swapped) of forward input `index`, pending a matmul
    index: int
    trans: bool


@dataclass(frozen=True)
class LogSoftmaxIn:  # log_softmax of forward input `index` over dim, pending the kl_div that reads it
    index: int
    dim: int


@dataclass(frozen=True)
class Attr:  # a parameter or buffer, by attribute path
    path: str


UNKNOWN = object()  # a tensor the IR cannot describe (other inputs, results of unsupported ops)

# Canonical op -> its parameters after the first operand, in torch's order, with torch's defaults.
_SPECS = {**{k: [] for k in ("sigmoid", "tanh", "exp", "log", "abs", "neg", "sqrt", "rsqrt", "square",
                             "identity")},
          "relu": [("inplace", False)], "silu": [("inplace", False)], "relu6": [("inplace", False)],
          "gelu": [("approximate", "none")], "elu": [("alpha", 1.0), ("inplace", False)],
          "leaky_relu": [("negative_slope", 0.01), ("inplace", False)],
          "hardtanh": [("min_val", -1.0), ("max_val", 1.0), ("inplace", False)],
          "softplus": [("beta", 1.0), ("threshold", 20.0)], "clamp": [("min", None), ("max", None)],
          "clamp_min": [("min", None)], "clamp_max": [("max", None)], "pow": [("exponent", None)],
          "add": [("other", None), ("alpha", 1)], "sub": [("other", None), ("alpha", 1)],
          "mul": [("other", None)], "div": [("other", None), ("rounding_mode", None)],
          "softmax": [("dim", None), ("dtype", None)], "log_softmax": [("dim", None), ("dtype", None)],
          "sum": [("dim", None), ("keepdim", False), ("dtype", None)],
          "mean": [("dim", None), ("keepdim", False), ("dtype", None)],
          "amax": [("dim", ()), ("keepdim", False)], "amin": [("dim", ()), ("keepdim", False)],
          "max": [("dim", None), ("keepdim", False)], "min": [("dim", None), ("keepdim", False)],
          "layer_norm": [("normalized_shape", None), ("weight", None), ("bias", None), ("eps", 1e-5)],
          "argmax": [("dim", None), ("keepdim", False)], "argmin": [("dim", None), ("keepdim", False)],
          "cumsum": [("dim", None), ("dtype", None)], "cumprod": [("dim", None), ("dtype", None)],
          **{f"max_pool{n}d": [("kernel_size", None), ("stride", None), ("padding", 0), ("dilation", 1),
                               ("ceil_mode", False), ("return_indices", False)] for n in (1, 2)},
          **{f"avg_pool{n}d": [("kernel_size", None), ("stride", None), ("padding", 0), ("ceil_mode", False),
                               ("count_include_pad", True), ("divisor_override", None)] for n in (1, 2)},
          "adaptive_avg_pool1d": [("output_size", None)], "adaptive_avg_pool2d": [("output_size", None)]}
_FUNCS = {torch.relu: "relu", F.relu: "relu", torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", torch.tanh: "tanh",
          F.tanh: "tanh", F.silu: "silu", F.gelu: "gelu", torch.exp: "exp", torch.log: "log", torch.abs: "abs",
          operator.abs: "abs", torch.neg: "neg", operator.neg: "neg", torch.sqrt: "sqrt", torch.rsqrt: "rsqrt",
          torch.square: "square", F.elu: "elu", F.leaky_relu: "leaky_relu", F.hardtanh: "hardtanh",
          F.relu6: "relu6", F.softplus: "softplus", torch.clamp: "clamp", torch.clip: "clamp",
          torch.clamp_min: "clamp_min", torch.clamp_max: "clamp_max", torch.pow: "pow", operator.pow: "pow",
          torch.add: "add", operator.add: "add", torch.sub: "sub", operator.sub: "sub", torch.mul: "mul",
          operator.mul: "mul", torch.div: "div", torch.true_divide: "div", operator.truediv: "div",
          torch.softmax: "softmax", F.softmax: "softmax", torch.log_softmax: "log_softmax",
          F.log_softmax: "log_softmax", torch.sum: "sum", torch.mean: "mean", torch.amax: "amax",
          torch.amin: "amin", torch.max: "max", torch.min: "min", F.layer_norm: "layer_norm",
          torch.argmax: "argmax", torch.argmin: "argmin", torch.cumsum: "cumsum", torch.cumprod: "cumprod",
          F.max_pool2d: "max_pool2d", F.max_pool2d_with_indices: "max_pool2d", torch.max_pool2d: "max_pool2d",
          F.max_pool1d: "max_pool1d", F.max_pool1d_with_indices: "max_pool1d", torch.max_pool1d: "max_pool1d",
          F.avg_pool2d: "avg_pool2d", F.avg_pool1d: "avg_pool1d", F.adaptive_avg_pool2d: "adaptive_avg_pool2d",
          F.adaptive_avg_pool1d: "adaptive_avg_pool1d"}
_METHODS = {**{k: k for k in _SPECS if k in dir(torch.Tensor)}, "clip": "clamp", "true_divide": "div",
            "contiguous": "identity"}
_MATMUL_FUNCS = {operator.matmul, torch.matmul, torch.mm, torch.bmm}
_MATMUL_METHODS = {"matmul", "mm", "bmm", "__matmul__"}
_REDUCE = {"sum": "sum", "mean": "mean", "amax": "max", "amin": "min", "max": "max", "min": "min"}

# Losses (over the forward's first two inputs: prediction, target) and norms over channels, F.* and nn.* spellings.
_LOSSES = {"cross_entropy": "cross_entropy", "mse_loss": "mse", "l1_loss": "l1", "smooth_l1_loss": "smooth_l1",
           "huber_loss": "huber"}
_CHANNEL_NORMS = ("batch_norm", "instance_norm", "group_norm")
_LEGACY = [("size_average", None), ("reduce", None), ("reduction", "mean")]
_SPECS.update({"cross_entropy": [("target", None), ("weight", None), ("size_average", None), ("ignore_index", -100),
                                 ("reduce", None), ("reduction", "mean"), ("label_smoothing", 0.0)],
               "mse_loss": [("target", None), *_LEGACY, ("weight", None)],
               "l1_loss": [("target", None), *_LEGACY, ("weight", None)],
               "smooth_l1_loss": [("target", None), *_LEGACY, ("beta", 1.0)],
               "huber_loss": [("target", None), ("reduction", "mean"), ("delta", 1.0), ("weight", None)],
               "batch_norm": [("running_mean", None), ("running_var", None), ("weight", None), ("bias", None),
                              ("training", False), ("momentum", 0.1), ("eps", 1e-5)],
               "instance_norm": [("running_mean", None), ("running_var", None), ("weight", None), ("bias", None),
                                 ("use_input_stats", True), ("momentum", 0.1), ("eps", 1e-5)],
               "group_norm": [("num_groups", None), ("weight", None), ("bias", None), ("eps", 1e-5)],
               "kl_div": [("target", None), *_LEGACY, ("log_target", False)]})
_FUNCS.update({getattr(F, k): k for k in (*_LOSSES, *_CHANNEL_NORMS, "kl_div")})
_LOSS_MODULES = {nn.CrossEntropyLoss: "cross_entropy", nn.MSELoss: "mse_loss", nn.L1Loss: "l1_loss",
                 nn.SmoothL1Loss: "smooth_l1_loss", nn.HuberLoss: "huber_loss"}


def _module_op(mod: nn.Module) -> tuple[str, dict] | None:
    """A torch.nn module's canonical op and hyper-parameters, read from the instance."""
    attrs = [(nn.ReLU, "relu", []), (nn.Sigmoid, "sigmoid", []), (nn.Tanh, "tanh", []), (nn.SiLU, "silu", []),
             (nn.Identity, "identity", []), (nn.GELU, "gelu", ["approximate"]), (nn.ELU, "elu", ["alpha"]),
             (nn.LeakyReLU, "leaky_relu", ["negative_slope"]), (nn.Hardtanh, "hardtanh", ["min_val", "max_val"]),
             (nn.Softplus, "softplus", ["beta", "threshold"]), (nn.Softmax, "softmax", ["dim"]),
             (nn.LogSoftmax, "log_softmax", ["dim"]),
             *[(cls, f"max_pool{n}d", ["kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"])
               for n, cls in ((1, nn.MaxPool1d), (2, nn.MaxPool2d))],
             (nn.AvgPool1d, "avg_pool1d", ["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"]),
             (nn.AvgPool2d, "avg_pool2d", ["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                                           "divisor_override"]),
             (nn.AdaptiveAvgPool1d, "adaptive_avg_pool1d", ["output_size"]),
             (nn.AdaptiveAvgPool2d, "adaptive_avg_pool2d", ["output_size"])]
    for cls, kind, names in attrs:
        if isinstance(mod, cls):
            return kind, {n: getattr(mod, n) for n in names}
    return None


def _module_spec(mod: nn.Module, target: str, args: tuple) -> tuple[str, dict] | None:
    """A loss or channel-norm module as its functional form's parameters (tensors by attribute path; "module":
    where the generated code reads its hyper-parameters at run time)."""
    def path(name: str) -> Attr | None:
        return Attr(f"{target}.{name}") if getattr(mod, name, None) is not None else None
    if type(mod) in _LOSS_MODULES and len(args) == 2:
        kind = _LOSS_MODULES[type(mod)]
        return kind, {**{n: getattr(mod, n, d) for n, d in _SPECS[kind]}, "target": args[1], "weight": path("weight"),
                      "module": target}
    norm = {"module": target, "weight": path("weight"), "bias": path("bias"), "eps": getattr(mod, "eps", None),
            "running_mean": path("running_mean"), "running_var": path("running_var")}
    if len(args) != 1:
        return None
    if isinstance(mod, nn.modules.batchnorm._BatchNorm):  # eval mode: the verifier runs models .eval()
        return "batch_norm", {**norm, "training": not mod.track_running_stats}  # no running stats: batch stats
    if isinstance(mod, nn.modules.instancenorm._InstanceNorm):  # spatial: its dims, to tell an unbatched input
        return "instance_norm", {**norm, "use_input_stats": True, "spatial": mod._get_no_batch_dim() - 1}
    if isinstance(mod, nn.GroupNorm):
        return "group_norm", {**norm, "num_groups": mod.num_groups}
    return None


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _step(kind: str, p: dict) -> tuple | None:
    """The pointwise step of a one-operand op, or None when its parameters are not plain numbers."""
    if kind in ("relu", "sigmoid", "tanh", "silu", "exp", "log", "abs", "neg", "sqrt", "rsqrt", "square"):
        return (kind,)
    if kind == "gelu":
        return {"none": ("gelu",), "tanh": ("gelu_tanh",)}.get(p["approximate"])
    if kind == "relu6":
        return ("hardtanh", 0.0, 6.0)
    if kind == "clamp_min" or kind == "clamp_max":
        p, kind = {"min": p.get("min"), "max": p.get("max")}, "clamp"
    names = {"elu": ["alpha"], "leaky_relu": ["negative_slope"], "hardtanh": ["min_val", "max_val"],
             "softplus": ["beta", "threshold"], "clamp": ["min", "max"], "pow": ["exponent"]}[kind]
    values = [_num(p[n]) for n in names]
    given = [p[n] is not None for n in names]
    if values != [v if g else None for v, g in zip(values, given)] or not any(given) \
            or (kind != "clamp" and not all(given)):  # a clamp bound may be absent, not both; others are needed
        return None
    return ("square",) if kind == "pow" and values[0] == 2.0 else (kind, *values)


def _bind(kind: str, args: tuple, kwargs: dict) -> dict | None:
    """Positional and keyword arguments (after the first operand) by name; None for anything unexpected."""
    spec = _SPECS[kind]
    if len(args) > len(spec) or set(kwargs) - {n for n, _ in spec} - {"_stacklevel"}:
        return None
    p = {n: args[i] if i < len(args) else kwargs.get(n, d) for i, (n, d) in enumerate(spec)}
    flags_ok = p.get("dtype") is None and p.get("rounding_mode") is None and p.get("alpha", 1) == 1
    return p if flags_ok else None


def _forward_source(source: str) -> str:
    try:
        for cls in ast.parse(source).body:
            if isinstance(cls, ast.ClassDef) and cls.name == "Model":
                for fn in cls.body:
                    if isinstance(fn, ast.FunctionDef) and fn.name == "forward":
                        return ast.get_source_segment(source, fn) or source
    except SyntaxError:
        pass
    return source


def analyze(problem) -> Analysis:
    """What `problem`'s reference computes over its first input, as plan.py's Ops, or why not."""
    model = None
    try:
        module = problem.load(small=True)
        model = module.Model(*module.get_init_inputs())
        graph = fx.symbolic_trace(model)
    except Exception as exc:  # unimportable, failing constructor, or data-dependent control flow
        n = len(inspect.signature(model.forward).parameters) if model is not None else 1
        return Analysis([], n_inputs=n, error=f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}")

    def input_shapes() -> list:  # asked only when a matmul or a transpose of an input is met
        try:
            return [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in module.get_inputs()]
        except Exception:
            return []
    try:
        return _Interpreter(graph, model, _forward_source(problem.source), input_shapes).run()
    except Exception as exc:  # a graph shape this interpreter did not foresee: say so, never raise
        return Analysis([], error=f"analysis failed: {type(exc).__name__}: {exc}")


class _Interpreter:
    def __init__(self, gm: fx.GraphModule, model: nn.Module, forward_src: str, input_shapes=lambda: []):
        self.gm, self.model, self.forward_src = gm, model, forward_src
        self._input_shapes, self._shapes = input_shapes, None
        self.inputs: dict[fx.Node, int] = {}  # placeholder -> its index
        self.ops: list[Op] = []
        self.unsupported: list[str] = []
        self.env: dict[fx.Node, object] = {}
        self.emitted: dict[Ew, int] = {}  # a chain used twice is emitted once

    def run(self) -> Analysis:
        n_inputs = 0
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self.env[node] = Ew(X) if n_inputs == 0 else UNKNOWN
                self.inputs[node] = n_inputs
                n_inputs += 1
            elif node.op == "get_attr":
                self.env[node] = Attr(node.target)
            elif node.op == "output":
                out = node.args[0]
                if not isinstance(out, fx.Node):
                    self.refuse("several outputs" if isinstance(out, (tuple, list, dict)) else "constant output",
                                node)
                elif isinstance(chain := self.realize(self.env[out]), Ew):
                    self.emit_chain(chain)
                elif isinstance(self.env[out], Attr):
                    self.note("returns a parameter")
            else:
                self.env[node] = self.call(node)
        if len(self.ops) > 1:
            self.note("+".join(op.kind for op in self.ops) + " fusion")
        return Analysis(self.ops, self.unsupported, n_inputs)

    # -- emitting ---------------------------------------------------------------------------------------
    def emit(self, kind: str, **detail) -> Ew:
        self.ops.append(Op(kind, detail))
        return Ew(len(self.ops) - 1)

    def emit_chain(self, chain: Ew) -> Ew:
        if not chain.steps:
            return chain
        if self.fold_epilogue(chain):
            return Ew(chain.base)
        if chain not in self.emitted:
            self.emitted[chain] = self.emit("elementwise", steps=[list(s) for s in chain.steps]).base
        return Ew(self.emitted[chain])

    def realize(self, v) -> Ew | None:
        """v as a chain over x or an emitted op, emitting the pending pieces it stands for; None if it is not."""
        if isinstance(v, Ew):
            return v
        if isinstance(v, MeanSq):
            self.emit_chain(replace(v.src, steps=v.src.steps + (("square",),)))
            mean = self.emit("reduce", op="mean", dim=-1, dim_attr=self.attr_name(-1, int), keepdim=True)
            return replace(mean, steps=v.post)
        if isinstance(v, Prod) and v.src is not None and v.src == v.inv_src:
            self.emit_chain(v.src)
            return self.emit("rmsnorm", eps=v.eps, eps_attr=self.attr_name(v.eps, float), weight=v.weight)
        if isinstance(v, (Prod, Pair)):
            self.note("mul" if isinstance(v, Prod) else f"{v.op} with indices")
        if isinstance(v, Operand):
            self.note("transpose")
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
        for name, v in vars(self.model).items():
            if (not name.startswith("_") and type(v) is typ and v == value
                    and re.search(rf"\bself\.{name}\b", self.forward_src)):
                return name
        return None

    # -- interpreting one node --------------------------------------------------------------------------
    def call(self, node: fx.Node):
        if self.is_matmul(node):
            return self.matmul(node)
        if (found := self.transposed(node)) is not None:
            return found
        if node.op == "call_module":
            mod = self.gm.get_submodule(node.target)
            name = type(mod).__name__.lower()
            if type(mod) is nn.Conv2d and len(node.args) == 1 and not node.kwargs:
                return self.conv2d(node, mod.weight.shape, mod.stride, mod.padding, mod.dilation, mod.groups,
                                   f"{node.target}.weight", f"{node.target}.bias" if mod.bias is not None else None,
                                   mod.padding_mode, module=node.target)
            if isinstance(mod, nn.LayerNorm) and len(node.args) == 1 and not node.kwargs:
                weight = f"{node.target}.weight" if mod.weight is not None else None
                bias = f"{node.target}.bias" if mod.bias is not None else None
                return self.layernorm(node, len(mod.normalized_shape), mod.eps, weight, bias)
            if (spec := _module_spec(mod, node.target, node.args)) is not None and not node.kwargs:
                return self.apply(spec[0], name, node, spec[1])
            found = _module_op(mod)
            if found is None or len(node.args) != 1 or node.kwargs:
                return self.refuse(name, node)
            kind, params = found
        elif node.op == "call_function" and node.target in (F.conv2d, torch.conv2d):
            return self.conv2d_call(node)
        elif node.target in (operator.getitem, getattr) and isinstance(self.value(node.args[0]), Pair):
            pair, which = self.env[node.args[0]], node.args[1]
            if which in (0, "values"):
                self.emit_chain(pair.src)
                return self.emit("reduce", op=pair.op, dim=pair.dim, dim_attr=self.attr_name(pair.dim, int),
                                 keepdim=pair.keepdim)
            self.emit_chain(pair.src)  # only the indices are used: an argmax/argmin
            return self.emit("argreduce", op=f"arg{pair.op}", dim=pair.dim, dim_attr=self.attr_name(pair.dim, int),
                             keepdim=pair.keepdim)
        else:
            table = _METHODS if node.op == "call_method" else _FUNCS
            name = node.target if node.op == "call_method" else getattr(node.target, "__name__", str(node.target))
            if node.target == getattr:
                name = str(node.args[1])
            kind = table.get(node.target)
            params = _bind(kind, node.args[1:], node.kwargs) if kind and node.args else None
            if params is None:
                return self.refuse(name, node)
        return self.apply(kind, name, node, params)

    def apply(self, kind: str, name: str, node: fx.Node, p: dict):
        a = self.value(node.args[0])
        if kind == "identity":
            return a
        if kind in ("add", "sub", "mul", "div"):
            return self.binary(kind, a, self.value(p["other"]), node)
        if kind == "log_softmax" and isinstance(p["dim"], int) and isinstance(node.args[0], fx.Node) \
                and self.inputs.get(node.args[0]) in (0, 1) \
                and node.users and all(u.target is F.kl_div for u in node.users):
            return LogSoftmaxIn(self.inputs[node.args[0]], p["dim"])  # maybe a kl_div of logits: its consumer decides
        if kind == "kl_div":
            return self.kl_div(node, p)
        if kind in ("softmax", "log_softmax"):
            if not isinstance(p["dim"], int) or not isinstance(chain := self.realize(a), Ew):
                return self.refuse(name, node)
            self.emit_chain(chain)
            return self.emit(kind, dim=p["dim"])
        if kind == "layer_norm":
            shape, w, b = p["normalized_shape"], self.value(p["weight"]), self.value(p["bias"])
            shape = (shape,) if isinstance(shape, int) else shape
            if (not isinstance(shape, (tuple, list, torch.Size)) or _num(p["eps"]) is None
                    or not all(v is None or isinstance(v, Attr) for v in (w, b))):
                return self.refuse(name, node)
            return self.layernorm(node, len(shape), float(p["eps"]), w and w.path, b and b.path)
        if kind in _LOSSES:
            return self.loss(kind, node, p)
        if kind in _CHANNEL_NORMS:
            return self.channel_norm(kind, node, p)
        if kind in _REDUCE:
            return self.reduce(kind, name, a, p, node)
        if kind in ("argmax", "argmin", "cumsum", "cumprod"):
            return self.arg_or_scan(kind, name, a, p, node)
        if "pool" in kind:
            return self.pool(kind, name, a, p, node)
        return self.apply_step(a, _step(kind, p), name, node)

    # -- matmul over the first two inputs ---------------------------------------------------------------
    def shapes(self) -> list:
        if self._shapes is None:
            self._shapes = self._input_shapes()
        return self._shapes

    def operand(self, arg) -> Operand | None:
        """arg as (a possibly transposed) forward input of 2 or 3 dims, or None."""
        if isinstance(arg, fx.Node) and arg in self.inputs:
            index = self.inputs[arg]
            shapes = self.shapes()
            if index < len(shapes) and shapes[index] is not None and len(shapes[index]) in (2, 3):
                return Operand(index, False)
            return None
        v = self.env.get(arg) if isinstance(arg, fx.Node) else None
        return v if isinstance(v, Operand) else None

    @staticmethod
    def is_matmul(node: fx.Node) -> bool:
        return ((node.op == "call_function" and node.target in _MATMUL_FUNCS)
                or (node.op == "call_method" and node.target in _MATMUL_METHODS)) and len(node.args) == 2 \
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

    def matmul(self, node: fx.Node):
        a, b = (self.operand(arg) for arg in node.args)
        shapes = self.shapes() if a and b else []
        ok = a is not None and b is not None and (a.index, b.index) == (0, 1) \
            and len(shapes[0]) == len(shapes[1]) and (len(shapes[0]) == 2 or shapes[0][0] == shapes[1][0])
        if not ok:
            return self.refuse("matmul", node)
        return self.emit("matmul", trans_a=a.trans, trans_b=b.trans)

    def value(self, arg):
        return self.env[arg] if isinstance(arg, fx.Node) else arg

    # -- convolution, its pointwise epilogue folded in ---------------------------------------------------
    def conv2d(self, node: fx.Node, wshape, stride, padding, dilation, groups, weight: str, bias, mode="zeros",
               module=None):
        """module: the nn.Conv2d's path, whose hyper-parameters the kernel then reads at run time (they may
        depend on sizes, as groups does in a depthwise conv); else the values, groups by attribute if read so."""
        def pair(v):
            return [int(v), int(v)] if isinstance(v, int) else [int(u) for u in v] if len(v) == 2 else None

        stride, dilation = pair(stride), pair(dilation)
        if padding == "valid":
            padding = 0
        elif padding == "same" and dilation and all(d * (k - 1) % 2 == 0 for d, k in zip(dilation, wshape[2:])):
            padding = [d * (k - 1) // 2 for d, k in zip(dilation, wshape[2:])]
        padding = pair(padding) if not isinstance(padding, str) else None
        if (None in (stride, padding, dilation) or mode != "zeros" or self.value(node.args[0]) != Ew(X)
                or not isinstance(groups, int)):
            return self.refuse("conv2d", node)
        return self.emit("conv2d", stride=stride, padding=padding, dilation=dilation, groups=groups, module=module,
                         groups_attr=self.attr_name(groups, int), weight=weight, bias=bias, steps=[], pool=None)

    def conv2d_call(self, node: fx.Node):
        names = ("weight", "bias", "stride", "padding", "dilation", "groups")
        given = dict(zip(names, node.args[1:]), **node.kwargs)
        w, b = self.value(given.get("weight")), self.value(given.get("bias"))
        if len(node.args) > 7 or set(given) - set(names) or not isinstance(w, Attr) or \
                not (b is None or isinstance(b, Attr)):
            return self.refuse("conv2d", node)
        shape = tuple(self.gm.get_parameter(w.path).shape) if w.path in dict(self.gm.named_parameters()) else ()
        if len(shape) != 4:
            return self.refuse("conv2d", node)
        return self.conv2d(node, shape, given.get("stride", 1), given.get("padding", 0), given.get("dilation", 1),
                           given.get("groups", 1), w.path, b.path if b is not None else None)

    def fold_epilogue(self, chain: Ew) -> bool:
        """Pointwise steps over the last op's result that op applies itself (a conv's epilogue, before any
        pooling): folded into it, and nothing is emitted."""
        if not (isinstance(chain.base, int) and chain.base == len(self.ops) - 1):
            return False
        op = self.ops[chain.base]
        if op.kind != "conv2d" or op.detail["steps"] or op.detail["pool"]:  # after a pool: its own op
            return False
        op.detail["steps"] = [list(s) for s in chain.steps]
        return True

    def layernorm(self, node: fx.Node, ndim: int, eps: float, weight, bias):
        if not isinstance(chain := self.realize(self.value(node.args[0])), Ew):
            return self.refuse("layernorm", node)
        self.emit_chain(chain)
        return self.emit("layernorm", ndim=ndim, eps=float(eps), weight=weight, bias=bias)

    def loss(self, kind: str, node: fx.Node, p: dict):
        """A loss of the forward's first two inputs as they are (prediction, target)."""
        args = [node.args[0], p["target"]]
        shapes = self.shapes()
        if [self.inputs.get(v) if isinstance(v, fx.Node) else None for v in args] != [0, 1] or len(shapes) < 2 \
                or None in shapes[:2]:
            return self.refuse(kind, node)
        for flag in ("weight", "size_average", "reduce"):
            if p.get(flag) is not None:
                return self.refuse(f"{kind} ({flag})", node)
        if p["reduction"] not in ("mean", "sum", "none"):
            return self.refuse(f"{kind} (reduction={p['reduction']})", node)
        if kind == "cross_entropy":
            ignore = p["ignore_index"]
            if _num(p["label_smoothing"]) != 0.0:
                return self.refuse("cross_entropy (label_smoothing)", node)
            if len(shapes[0]) != len(shapes[1]) + 1 or type(ignore) is not int:  # targets are class indices
                return self.refuse("cross_entropy (probability targets)", node)
            return self.emit("cross_entropy", reduction=p["reduction"], ignore_index=ignore,
                             ignore_index_attr=self.hyper(p, "ignore_index", ignore, int))
        if shapes[0] != shapes[1]:
            return self.refuse(f"{kind} (broadcast)", node)
        name = "beta" if "beta" in p else "delta" if "delta" in p else None
        if name and _num(p[name]) is None:
            return self.refuse(kind, node)
        return self.emit("loss", fn=_LOSSES[kind], reduction=p["reduction"], param=name and _num(p[name]),
                         param_attr=name and self.hyper(p, name, p[name], float))

    def kl_div(self, node: fx.Node, p: dict):
        """kl_div(log_softmax(a, d), log_softmax(b, d), log_target=True) of the first two inputs, fused."""
        lp, lq = self.value(node.args[0]), self.value(p["target"])
        shapes = self.shapes()
        if isinstance(lp, LogSoftmaxIn) and isinstance(lq, LogSoftmaxIn) and (lp.index, lq.index) == (0, 1) \
                and lp.dim == lq.dim and p["log_target"] is True and p["size_average"] is None \
                and p["reduce"] is None and p["reduction"] in ("batchmean", "sum", "mean") and len(shapes) >= 2 \
                and shapes[0] is not None and shapes[0] == shapes[1]:
            return self.emit("kl_div_logits", dim=lp.dim, reduction=p["reduction"])
        for v in (lp, lq):  # the pending log_softmaxes, as they would have been without the fusion
            if isinstance(v, LogSoftmaxIn) and v.index == 0:
                self.emit("log_softmax", dim=v.dim)
            elif isinstance(v, LogSoftmaxIn):
                self.note("log_softmax")
        return self.refuse("kl_div", node)

    def channel_norm(self, kind: str, node: fx.Node, p: dict):
        """batch_norm (eval: running statistics), instance_norm or group_norm over (N, C, *spatial)."""
        chain = self.realize(self.value(node.args[0]))
        w, b = self.value(p["weight"]), self.value(p["bias"])
        stats = [self.value(p.get(k)) for k in ("running_mean", "running_var")]
        if not isinstance(chain, Ew) or _num(p["eps"]) is None \
                or not all(v is None or isinstance(v, Attr) for v in (w, b, *stats)):
            return self.refuse(kind, node)
        if kind == "batch_norm" and (p["training"] is not False or None in stats):
            return self.refuse("batch_norm (training)", node)  # batch statistics, running buffers updated
        if kind == "instance_norm" and (stats != [None, None] or p["use_input_stats"] is not True):
            return self.refuse("instance_norm (running stats)", node)
        if kind == "group_norm" and type(p["num_groups"]) is not int:
            return self.refuse(kind, node)
        self.emit_chain(chain)
        eps = float(p["eps"])
        common = {"eps": eps, "eps_attr": self.hyper(p, "eps", p["eps"], float), "weight": w and w.path,
                  "bias": b and b.path}
        if kind == "batch_norm":
            return self.emit("batchnorm", **common, running_mean=stats[0].path, running_var=stats[1].path)
        if kind == "instance_norm":
            return self.emit("instancenorm", **common, spatial=p.get("spatial"))
        groups = p["num_groups"]
        return self.emit("groupnorm", groups=groups, groups_attr=self.hyper(p, "num_groups", groups, int), **common)

    def hyper(self, p: dict, name: str, value, typ) -> str | None:
        """Where forward reads a hyper-parameter: its module's attribute (nn.* spelling), or self.<attr>."""
        return f"{p['module']}.{name}" if p.get("module") else self.attr_name(value, typ)

    def reduce(self, kind: str, name: str, a, p: dict, node: fx.Node):
        dim = p["dim"]
        if isinstance(dim, (tuple, list)) and len(dim) <= 1:
            dim = dim[0] if dim else None  # one dim as a list; () or [] means all of them
        if isinstance(dim, fx.Node) or (dim is not None and not isinstance(dim, int)):
            return self.refuse(f"{name} over several dims" if isinstance(dim, (tuple, list)) else name, node)
        if kind == "mean" and dim == -1 and p["keepdim"] is True and isinstance(a, Ew) \
                and a.steps[-1:] == (("square",),):
            return MeanSq(replace(a, steps=a.steps[:-1]))  # maybe an rmsnorm: decided by its consumers
        if not isinstance(chain := self.realize(a), Ew):
            return self.refuse(name, node)
        if kind in ("max", "min") and dim is not None:  # a (values, indices) pair
            return Pair(chain, kind, dim, bool(p["keepdim"]))
        self.emit_chain(chain)
        return self.emit("reduce", op=_REDUCE[kind], dim=dim, dim_attr=self.attr_name(dim, int) if dim is not None
                         else None, keepdim=bool(p["keepdim"]))

    def binary(self, kind: str, a, b, node: fx.Node):
        ca, cb = _num(a), _num(b)
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
            if all(getattr(fa, k) is None or getattr(fb, k) is None for k in ("src", "eps", "weight")):
                return Prod(**merged)
        if kind == "div" and isinstance(b, MeanSq) and len(b.post) == 2 and b.post[1] in (("sqrt",), ("pow", 0.5)) \
                and b.post[0][0] == "add" and (fa := self.factor(a)) and fa.eps is None:
            return replace(fa, eps=b.post[0][1], inv_src=b.src)  # x / sqrt(mean(x^2) + eps)
        return self.refuse(kind, node)

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
            return Prod(eps=v.post[0][1], inv_src=v.src)
        return None

    # -- arg-reductions, scans and pooling over a chain ---------------------------------------------------
    def arg_or_scan(self, kind: str, name: str, a, p: dict, node: fx.Node):
        """argmax / argmin over one dim or all (an argreduce Op); cumsum / cumprod along one dim (a scan Op)."""
        dim, scan = p["dim"], kind in ("cumsum", "cumprod")
        if isinstance(dim, bool) or not (isinstance(dim, int) or (dim is None and not scan)):
            return self.refuse(f"{name} over several dims" if isinstance(dim, (tuple, list)) else name, node)
        if not isinstance(chain := self.realize(a), Ew):
            return self.refuse(name, node)
        self.emit_chain(chain)
        dim_attr = self.attr_name(dim, int) if dim is not None else None
        if scan:
            return self.emit("scan", op=kind, dim=dim, dim_attr=dim_attr)
        return self.emit("argreduce", op=kind, dim=dim, dim_attr=dim_attr, keepdim=bool(p["keepdim"]))

    def pool(self, kind: str, name: str, a, p: dict, node: fx.Node):
        """Max / avg / adaptive-avg pooling, 2-D or 1-D (as H = 1), as one pool2d Op with [H, W] pairs."""
        nd = 1 if kind.endswith("1d") else 2

        def hw(v, fill, none_ok=False):  # an int or nd ints -> [H, W] (1-D: [fill, v]); None if not plain ints
            v = list(v) if isinstance(v, (tuple, list)) else [v] * nd
            least = 0 if fill == 0 else 1  # padding may be 0, sizes not
            ok = len(v) == nd and all((type(i) is int and i >= least) or (none_ok and i is None) for i in v)
            return ([fill] * (2 - nd) + v) if ok else None

        if p.get("return_indices") or p.get("divisor_override") is not None:
            flag = "return_indices" if p.get("return_indices") else "divisor_override"
            return self.refuse(f"{kind} with {flag}", node)
        if kind.startswith("adaptive"):
            geometry = {"kernel": None, "stride": None, "padding": None, "dilation": None}
            out = hw(p["output_size"], 1, none_ok=nd == 2)
            ok = out is not None
        else:
            kernel = hw(p["kernel_size"], 1)
            stride = kernel if p["stride"] in (None, [], ()) else hw(p["stride"], 1)
            geometry = {"kernel": kernel, "stride": stride, "padding": hw(p["padding"], 0),
                        "dilation": hw(p.get("dilation", 1), 1)}
            out = None
            ok = None not in geometry.values() and isinstance(p["ceil_mode"], bool)
        if not ok or not isinstance(chain := self.realize(a), Ew):
            return self.refuse(name, node)
        self.emit_chain(chain)
        detail = dict(pool="adaptive_avg" if out else kind[:3], dims=nd, **geometry,
                      ceil_mode=p.get("ceil_mode", False), count_include_pad=bool(p.get("count_include_pad")),
                      output_size=out)
        last = self.ops[-1] if self.ops and chain.base == len(self.ops) - 1 else None
        if last is not None and last.kind == "conv2d" and last.detail["pool"] is None and nd == 2:
            last.detail["pool"] = detail  # pooled inside the conv's op: conv (+ epilogue), then the pool kernel
            return Ew(chain.base)
        return self.emit("pool2d", **detail)
