"""How pooling is read from a traced reference: nn.MaxPool1d/2d, nn.AvgPool1d/2d, nn.AdaptiveAvgPool1d/2d and their
F.* / torch.* spellings, each as one pool2d Op with [H, W] pairs (1-D: H = 1). A 2-D pooling of a conv2d's result
that nothing else reads folds into the conv (its detail's "pool": the conv family launches this family's kernel
after its own)."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelcraft.propose.builtin.recognize import Recognizer
from kernelcraft.propose.builtin.values import Ew

# Canonical pooling -> its parameters after the input, in torch's order, with torch's defaults.
SPECS = {**{f"max_pool{n}d": [("kernel_size", None), ("stride", None), ("padding", 0), ("dilation", 1),
                              ("ceil_mode", False), ("return_indices", False)] for n in (1, 2)},
         **{f"avg_pool{n}d": [("kernel_size", None), ("stride", None), ("padding", 0), ("ceil_mode", False),
                              ("count_include_pad", True), ("divisor_override", None)] for n in (1, 2)},
         "adaptive_avg_pool1d": [("output_size", None)], "adaptive_avg_pool2d": [("output_size", None)]}
FUNCTIONS = {F.max_pool2d: "max_pool2d", F.max_pool2d_with_indices: "max_pool2d", torch.max_pool2d: "max_pool2d",
             F.max_pool1d: "max_pool1d", F.max_pool1d_with_indices: "max_pool1d", torch.max_pool1d: "max_pool1d",
             F.avg_pool2d: "avg_pool2d", F.avg_pool1d: "avg_pool1d", F.adaptive_avg_pool2d: "adaptive_avg_pool2d",
             F.adaptive_avg_pool1d: "adaptive_avg_pool1d"}
# module type -> (canonical pooling, the attributes holding its parameters)
MODULES = {**{cls: (f"max_pool{n}d", ["kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"])
              for n, cls in ((1, nn.MaxPool1d), (2, nn.MaxPool2d))},
           nn.AvgPool1d: ("avg_pool1d", ["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"]),
           nn.AvgPool2d: ("avg_pool2d", ["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                                         "divisor_override"]),
           nn.AdaptiveAvgPool1d: ("adaptive_avg_pool1d", ["output_size"]),
           nn.AdaptiveAvgPool2d: ("adaptive_avg_pool2d", ["output_size"])}


def bind(kind: str, args: tuple, kwargs: dict) -> dict | None:
    """Positional and keyword arguments (after the input) by name, torch's defaults for the others; None for an
    argument the spelling does not take."""
    spec = SPECS[kind]
    if len(args) > len(spec) or set(kwargs) - {n for n, _ in spec} - {"_stacklevel"}:
        return None
    return {n: args[i] if i < len(args) else kwargs.get(n, d) for i, (n, d) in enumerate(spec)}


def pool_call(ix, node):
    """F.max_pool2d(x, ...) and the other functional spellings."""
    name = getattr(node.target, "__name__", str(node.target))
    kind = FUNCTIONS[node.target]
    p = bind(kind, node.args[1:], node.kwargs) if node.args else None
    if p is None:
        return ix.refuse(name, node)
    return pool(ix, kind, name, ix.value(node.args[0]), p, node)


def pool_module(ix, node, mod):
    """self.pool(x): the module's parameters as its functional spelling's."""
    name = type(mod).__name__.lower()
    if len(node.args) != 1 or node.kwargs:
        return ix.refuse(name, node)
    kind, attrs = MODULES[type(mod)]
    return pool(ix, kind, name, ix.value(node.args[0]), {n: getattr(mod, n) for n in attrs}, node)


def pool(ix, kind: str, name: str, a, p: dict, node):
    """Max / avg / adaptive-avg pooling, 2-D or 1-D (as H = 1), as one pool2d Op with [H, W] pairs."""
    nd = 1 if kind.endswith("1d") else 2

    def hw(v, fill, none_ok=False):  # an int or nd ints -> [H, W] (1-D: [fill, v]); None if not plain ints
        v = list(v) if isinstance(v, (tuple, list)) else [v] * nd
        least = 0 if fill == 0 else 1  # padding may be 0, sizes not
        ok = len(v) == nd and all((type(i) is int and i >= least) or (none_ok and i is None) for i in v)
        return ([fill] * (2 - nd) + v) if ok else None

    if p.get("return_indices") or p.get("divisor_override") is not None:
        flag = "return_indices" if p.get("return_indices") else "divisor_override"
        return ix.refuse(f"{kind} with {flag}", node)
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
    if not ok or not isinstance(chain := ix.realize(a), Ew):
        return ix.refuse(name, node)
    src = ix.emit_chain(chain).base
    detail = dict(pool="adaptive_avg" if out else kind[:3], dims=nd, **geometry,
                  ceil_mode=p.get("ceil_mode", False), count_include_pad=bool(p.get("count_include_pad")),
                  output_size=out)
    last = ix.ops[src] if isinstance(src, int) and src == len(ix.ops) - 1 else None
    if last is not None and last.kind == "conv2d" and last.detail["pool"] is None and nd == 2 \
            and ix.foldable(src, None, Ew(src)):
        last.detail["pool"] = detail  # pooled inside the conv's op: conv (+ epilogue), then the pool kernel
        return Ew(src)
    return ix.emit("pool2d", src, **detail)


RECOGNIZER = Recognizer(modules={cls: pool_module for cls in MODULES},
                        functions={f: pool_call for f in FUNCTIONS})
