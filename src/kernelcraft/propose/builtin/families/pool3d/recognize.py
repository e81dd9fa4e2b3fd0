"""How the pool3d family reads 3-D pooling from a traced reference: nn.MaxPool3d, nn.AvgPool3d, nn.AdaptiveAvgPool3d
and nn.AdaptiveMaxPool3d, and the functions F.max_pool3d, torch.max_pool3d, F.avg_pool3d (torch has no avg_pool3d of
its own: F's is torch._C._nn's), F.adaptive_avg_pool3d (and torch._C._nn's) and F.adaptive_max_pool3d, each as one
pool3d Op (plan.py) with [d, h, w] triples.

Refused, in words: the indices (return_indices, and the *_with_indices functions, which always return them),
divisor_override, and geometry that is not plain ints (sizes computed from the input, a forward called with more
than the input)."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelcraft.propose.builtin.recognize import Recognizer

# each spelling's parameters after the input, in torch's order, with torch's defaults
_MAX = (("kernel_size", None), ("stride", None), ("padding", 0), ("dilation", 1), ("ceil_mode", False),
        ("return_indices", False))
_AVG = (("kernel_size", None), ("stride", None), ("padding", 0), ("ceil_mode", False), ("count_include_pad", True),
        ("divisor_override", None))
_ADAPTIVE = (("output_size", None), ("return_indices", False))


def _triple(value, least: int, none_ok: bool = False) -> list | None:
    """An int or three ints as [d, h, w]; None unless each is an int >= least (or None, where none_ok)."""
    vals = list(value) if isinstance(value, (tuple, list)) else [value] * 3
    ok = len(vals) == 3 and all((type(v) is int and v >= least) or (none_ok and v is None) for v in vals)
    return vals if ok else None


def detail(pool: str, p: dict) -> dict | None:
    """The pool3d Op detail of a pooling `pool` ("max", "avg", "adaptive_avg", "adaptive_max") with parameters `p`
    (by torch's names), or None when they are not plain numbers."""
    if pool.startswith("adaptive"):
        out = _triple(p["output_size"], 1, none_ok=True)
        return None if out is None else {"pool": pool, "kernel": None, "stride": None, "padding": None,
                                         "dilation": None, "ceil_mode": False, "count_include_pad": False,
                                         "output_size": out}
    kernel = _triple(p["kernel_size"], 1)
    stride = kernel if p["stride"] is None or (isinstance(p["stride"], (tuple, list)) and not p["stride"]) \
        else _triple(p["stride"], 1)
    geometry = {"kernel": kernel, "stride": stride, "padding": _triple(p["padding"], 0),
                "dilation": _triple(p.get("dilation", 1), 1)}
    flags = (p["ceil_mode"], p.get("count_include_pad", False))
    if None in geometry.values() or not all(type(f) is bool for f in flags):
        return None
    return {"pool": pool, **geometry, "ceil_mode": flags[0], "count_include_pad": pool == "avg" and flags[1],
            "output_size": None}


def _emit(ix, node, pool: str, name: str, p: dict):
    """One pool3d Op over the node's input, or the refusal saying what is not covered."""
    if p.get("return_indices"):
        return ix.refuse(f"{name} with return_indices", node)
    if p.get("divisor_override") is not None:
        return ix.refuse(f"{name} with divisor_override", node)
    found = detail(pool, p)
    chain = ix.realize(ix.value(node.args[0])) if found is not None else None
    if chain is None:
        return ix.refuse(name, node)
    return ix.emit("pool3d", ix.emit_chain(chain).base, **found)


def _call(pool: str, name: str, spec: tuple):
    """The handler of a function taking (input, *spec) by position or keyword."""
    def handle(ix, node):
        names = [n for n, _ in spec]
        if not node.args or len(node.args) - 1 > len(names) or set(node.kwargs) - set(names) \
                or set(node.kwargs) & set(names[:len(node.args) - 1]):
            return ix.refuse(name, node)
        given = {**dict(zip(names, node.args[1:])), **node.kwargs}
        return _emit(ix, node, pool, name, {n: given.get(n, default) for n, default in spec})
    return handle


def _module(pool: str, name: str, spec: tuple):
    """The handler of an nn module whose attributes are the function's parameters."""
    def handle(ix, node, module):
        if len(node.args) != 1 or node.kwargs:
            return ix.refuse(type(module).__name__.lower(), node)
        return _emit(ix, node, pool, name, {n: getattr(module, n, default) for n, default in spec})
    return handle


def _indices(name: str):
    """A function that always returns the indices too."""
    def handle(ix, node):
        return ix.refuse(f"{name} with return_indices", node)
    return handle


RECOGNIZER = Recognizer(
    modules={nn.MaxPool3d: _module("max", "max_pool3d", _MAX), nn.AvgPool3d: _module("avg", "avg_pool3d", _AVG),
             nn.AdaptiveAvgPool3d: _module("adaptive_avg", "adaptive_avg_pool3d", _ADAPTIVE[:1]),
             nn.AdaptiveMaxPool3d: _module("adaptive_max", "adaptive_max_pool3d", _ADAPTIVE)},
    functions={F.max_pool3d: _call("max", "max_pool3d", _MAX),
               torch.max_pool3d: _call("max", "max_pool3d", _MAX[:-1]),
               F.avg_pool3d: _call("avg", "avg_pool3d", _AVG),
               F.adaptive_avg_pool3d: _call("adaptive_avg", "adaptive_avg_pool3d", _ADAPTIVE[:1]),
               torch._C._nn.adaptive_avg_pool3d: _call("adaptive_avg", "adaptive_avg_pool3d", _ADAPTIVE[:1]),
               F.adaptive_max_pool3d: _call("adaptive_max", "adaptive_max_pool3d", _ADAPTIVE),
               F.max_pool3d_with_indices: _indices("max_pool3d"),
               F.adaptive_max_pool3d_with_indices: _indices("adaptive_max_pool3d")})
