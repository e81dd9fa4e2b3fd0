"""How torch spells the ops analyze.py's core knows: functions, tensor methods and nn modules, each mapped to a
canonical op with its parameters in torch's order and with torch's defaults. (A family's own ops are spelled in
its recognize.py, bound by `bind` here.)"""

from __future__ import annotations

import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

# Canonical op -> its parameters after the first operand, in torch's order, with torch's defaults.
SPECS = {**{k: [] for k in ("sigmoid", "tanh", "exp", "log", "abs", "neg", "sqrt", "rsqrt", "square",
                             "identity")},
          "relu": [("inplace", False)], "silu": [("inplace", False)], "relu6": [("inplace", False)],
          **{k: [("inplace", False)] for k in ("mish", "selu", "hardsigmoid", "hardswish")}, "softsign": [],
          "gelu": [("approximate", "none")], "elu": [("alpha", 1.0), ("inplace", False)],
          "leaky_relu": [("negative_slope", 0.01), ("inplace", False)],
          "hardtanh": [("min_val", -1.0), ("max_val", 1.0), ("inplace", False)],
          "softplus": [("beta", 1.0), ("threshold", 20.0)], "clamp": [("min", None), ("max", None)],
          "clamp_min": [("min", None)], "clamp_max": [("max", None)], "pow": [("exponent", None)],
          "add": [("other", None), ("alpha", 1)], "sub": [("other", None), ("alpha", 1)],
          "mul": [("other", None)], "minimum": [("other", None)], "maximum": [("other", None)], "div": [("other", None), ("rounding_mode", None)],
          "softmax": [("dim", None), ("dtype", None)], "log_softmax": [("dim", None), ("dtype", None)],
          "sum": [("dim", None), ("keepdim", False), ("dtype", None)],
          "mean": [("dim", None), ("keepdim", False), ("dtype", None)],
          "amax": [("dim", ()), ("keepdim", False)], "logsumexp": [("dim", None), ("keepdim", False)],
          "norm": [("p", "fro"), ("dim", None), ("keepdim", False), ("out", None), ("dtype", None)], "amin": [("dim", ()), ("keepdim", False)],
          "vector_norm": [("ord", 2), ("dim", None), ("keepdim", False), ("out", None), ("dtype", None)],
          "max": [("dim", None), ("keepdim", False)], "min": [("dim", None), ("keepdim", False)],
          "layer_norm": [("normalized_shape", None), ("weight", None), ("bias", None), ("eps", 1e-5)],
          "masked_fill": [("mask", None), ("value", None)]}
FUNCS = {torch.relu: "relu", F.relu: "relu", torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", torch.tanh: "tanh",
          F.tanh: "tanh", F.silu: "silu", F.gelu: "gelu", torch.exp: "exp", torch.log: "log", torch.abs: "abs",
          operator.abs: "abs", torch.neg: "neg", operator.neg: "neg", torch.sqrt: "sqrt", torch.rsqrt: "rsqrt",
          torch.square: "square", F.elu: "elu", F.leaky_relu: "leaky_relu", F.hardtanh: "hardtanh",
          F.relu6: "relu6", F.softplus: "softplus", torch.clamp: "clamp", torch.clip: "clamp",
          torch.clamp_min: "clamp_min", torch.clamp_max: "clamp_max", torch.pow: "pow", operator.pow: "pow",
          torch.add: "add", operator.add: "add", torch.sub: "sub", operator.sub: "sub", torch.mul: "mul",
          operator.mul: "mul", torch.div: "div", torch.true_divide: "div", operator.truediv: "div",
          torch.softmax: "softmax", F.softmax: "softmax", torch.log_softmax: "log_softmax",
          F.log_softmax: "log_softmax", torch.sum: "sum", torch.mean: "mean", torch.amax: "amax",
          torch.amin: "amin", torch.logsumexp: "logsumexp", torch.norm: "norm", torch.linalg.vector_norm: "vector_norm", torch.clone: "identity", torch.max: "max", torch.min: "min", F.layer_norm: "layer_norm",
          F.mish: "mish", torch.selu: "selu", F.selu: "selu",
          F.hardsigmoid: "hardsigmoid", F.hardswish: "hardswish", F.softsign: "softsign",
          torch.multiply: "mul", torch.subtract: "sub", torch.divide: "div", torch.minimum: "minimum",
          torch.maximum: "maximum", torch.masked_fill: "masked_fill"}
METHODS = {**{k: k for k in SPECS if k in dir(torch.Tensor)}, "clip": "clamp", "true_divide": "div",
            "contiguous": "identity", "clone": "identity", "detach": "identity", "multiply": "mul", "subtract": "sub",
            "divide": "div"}  # a copy: the kernels never alias
MATMUL_FUNCS = {operator.matmul, torch.matmul, torch.mm, torch.bmm}
MATMUL_METHODS = {"matmul", "mm", "bmm", "__matmul__"}
REDUCE = {"sum": "sum", "mean": "mean", "amax": "max", "amin": "min", "max": "max", "min": "min",
          "logsumexp": "logsumexp", "norm": "norm2", "vector_norm": "norm2"}  # the 2-norm (bind refuses others)


_CAST_METHODS = {"float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16}
CAST_STEPS = {torch.float16: ("round_fp16",), torch.bfloat16: ("round_bf16",)}  # a narrowing cast: a rounding step
_TO_COPY_FLAGS = {"layout": None, "device": None, "pin_memory": None, "non_blocking": False, "copy": False,
                  "memory_format": None}


def cast_dtype(node, value=lambda a: a) -> torch.dtype | None:
    """The floating dtype a node casts its one tensor to (`x.float()`, `x.to(torch.bfloat16)`, `x.to(dtype=...)`,
    `h.to(x.dtype)`, ATen's `_to_copy(x, dtype=...)` of an export graph), else None (no cast, or one with other
    effects: a device, a layout, a memory format). `value`: what an argument that is a graph node stands for."""
    args, kwargs = tuple(value(a) for a in node.args[1:]), {k: value(v) for k, v in node.kwargs.items()}
    if node.op == "call_method" and node.target in _CAST_METHODS:
        return _CAST_METHODS[node.target] if not args and not kwargs else None
    if node.op == "call_method" and node.target == "to":
        dtype = args[0] if len(args) == 1 and not kwargs else kwargs.pop("dtype", None) if not args else None
    elif node.op == "call_function" and getattr(node.target, "__name__", "") == "_to_copy.default" and not args:
        dtype = kwargs.pop("dtype", None)
    else:
        return None
    if any(_TO_COPY_FLAGS.get(k, object()) != v for k, v in kwargs.items()):
        return None
    return dtype if isinstance(dtype, torch.dtype) and dtype in (torch.float32, *CAST_STEPS) else None


def module_op(mod: nn.Module) -> tuple[str, dict] | None:
    """A torch.nn module's canonical op and hyper-parameters, read from the instance."""
    attrs = [(nn.ReLU, "relu", []), (nn.Sigmoid, "sigmoid", []), (nn.Tanh, "tanh", []), (nn.SiLU, "silu", []),
             (nn.Identity, "identity", []), (nn.Mish, "mish", []), (nn.SELU, "selu", []),
             (nn.Hardsigmoid, "hardsigmoid", []), (nn.Hardswish, "hardswish", []), (nn.Softsign, "softsign", []),
             # dropout is the identity in eval mode, where the verifier runs the reference (and the candidate)
             (nn.modules.dropout._DropoutNd, "identity", []), (nn.GELU, "gelu", ["approximate"]), (nn.ELU, "elu", ["alpha"]),
             (nn.LeakyReLU, "leaky_relu", ["negative_slope"]), (nn.Hardtanh, "hardtanh", ["min_val", "max_val"]),
             (nn.Softplus, "softplus", ["beta", "threshold"]), (nn.Softmax, "softmax", ["dim"]),
             (nn.LogSoftmax, "log_softmax", ["dim"])]
    for cls, kind, names in attrs:
        if isinstance(mod, cls):
            return kind, {n: getattr(mod, n) for n in names}
    return None


def num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def step(kind: str, p: dict) -> tuple | None:
    """The pointwise step of a one-operand op, or None when its parameters are not plain numbers."""
    if kind in ("relu", "sigmoid", "tanh", "silu", "exp", "log", "abs", "neg", "sqrt", "rsqrt", "square", "mish",
                "selu", "hardsigmoid", "hardswish", "softsign"):
        return (kind,)
    if kind == "gelu":
        return {"none": ("gelu",), "tanh": ("gelu_tanh",)}.get(p["approximate"])
    if kind == "relu6":
        return ("hardtanh", 0.0, 6.0)
    if kind == "clamp_min" or kind == "clamp_max":
        p, kind = {"min": p.get("min"), "max": p.get("max")}, "clamp"
    names = {"elu": ["alpha"], "leaky_relu": ["negative_slope"], "hardtanh": ["min_val", "max_val"],
             "softplus": ["beta", "threshold"], "clamp": ["min", "max"], "pow": ["exponent"]}[kind]
    values = [num(p[n]) for n in names]
    given = [p[n] is not None for n in names]
    if values != [v if g else None for v, g in zip(values, given)] or not any(given) \
            or (kind != "clamp" and not all(given)):  # a clamp bound may be absent, not both; others are needed
        return None
    return ("square",) if kind == "pow" and values[0] == 2.0 else (kind, *values)


def dim_list(dim):
    """A reduction's dim: one dim in a list -> that dim; () or [] -> None (all of them); several -> a list, sorted
    when all are ints."""
    if not isinstance(dim, (tuple, list)):
        return dim
    if len(dim) <= 1:
        return dim[0] if dim else None
    return sorted(dim) if all(type(d) is int for d in dim) else list(dim)


def reducible_dims(kind: str, dim) -> bool:
    """Whether the reduce family takes `dim` (dim_list's): one int, None (all), or adjacent ints (not for torch.max
    and torch.min, which take one dim)."""
    if isinstance(dim, list):
        return kind not in ("max", "min") and adjacent_dims(dim)
    return dim is None or type(dim) is int


def adjacent_dims(dims) -> bool:
    """Several distinct int dims, all counted from the front or all from the back, that sit side by side (so they
    are adjacent at any rank, and a contiguous tensor reduces them as one dim)."""
    if len(dims) < 2 or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        return False
    ds = sorted(dims)
    return (ds[0] >= 0 or ds[-1] < 0) and ds == list(range(ds[0], ds[0] + len(ds)))


def bind(kind: str | list, args: tuple, kwargs: dict) -> dict | None:
    """Positional and keyword arguments (after the first operand) by name; None for anything unexpected. `kind`: a
    canonical op of SPECS, or a spec of a family's own ([(name, default), ...], recognize.call)."""
    spec = SPECS[kind] if isinstance(kind, str) else kind
    if len(args) > len(spec) or set(kwargs) - {n for n, _ in spec} - {"_stacklevel"}:
        return None
    p = {n: args[i] if i < len(args) else kwargs.get(n, d) for i, (n, d) in enumerate(spec)}
    flags_ok = p.get("dtype") is None and p.get("rounding_mode") is None and p.get("alpha", 1) == 1 \
        and p.get("out") is None and p.get("p", 2) in ("fro", 2) and p.get("ord", 2) == 2
    return p if flags_ok else None
