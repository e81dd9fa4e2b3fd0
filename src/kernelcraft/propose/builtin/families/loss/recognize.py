"""How losses are read: F.cross_entropy, F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.huber_loss and their nn modules,
of the forward's first two inputs as they are (prediction, target); and F.kl_div(log_softmax(a, d),
log_softmax(b, d), log_target=True) of the first two inputs, fused into one op. The interpreter keeps a
log_softmax of an input that only a kl_div reads pending (values.LogSoftmaxIn); the kl_div decides here."""

from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F
from torch import fx

from kernelcraft.propose.builtin import spellings as sp
from kernelcraft.propose.builtin.recognize import Recognizer, call, hyper
from kernelcraft.propose.builtin.values import Attr, LogSoftmaxIn

# Each spelling's parameters after the prediction, in torch's order, with torch's defaults.
_LEGACY = [("size_average", None), ("reduce", None), ("reduction", "mean")]
SPECS = {"cross_entropy": [("target", None), ("weight", None), ("size_average", None), ("ignore_index", -100),
                           ("reduce", None), ("reduction", "mean"), ("label_smoothing", 0.0)],
         "mse_loss": [("target", None), *_LEGACY, ("weight", None)],
         "l1_loss": [("target", None), *_LEGACY, ("weight", None)],
         "smooth_l1_loss": [("target", None), *_LEGACY, ("beta", 1.0)],
         "huber_loss": [("target", None), ("reduction", "mean"), ("delta", 1.0), ("weight", None)],
         "kl_div": [("target", None), *_LEGACY, ("log_target", False)]}
LOSSES = {"cross_entropy": "cross_entropy", "mse_loss": "mse", "l1_loss": "l1", "smooth_l1_loss": "smooth_l1",
          "huber_loss": "huber"}  # spelling -> the loss op's kind ("cross_entropy") or fn
MODULES = {nn.CrossEntropyLoss: "cross_entropy", nn.MSELoss: "mse_loss", nn.L1Loss: "l1_loss",
           nn.SmoothL1Loss: "smooth_l1_loss", nn.HuberLoss: "huber_loss"}


def loss(ix, kind: str, node: fx.Node, p: dict):
    """A loss of the forward's first two inputs as they are (prediction, target)."""
    args = [node.args[0], p["target"]]
    shapes = ix.shapes()
    if [ix.inputs.get(v) if isinstance(v, fx.Node) else None for v in args] != [0, 1] or len(shapes) < 2 \
            or None in shapes[:2]:
        return ix.refuse(kind, node)
    for flag in ("weight", "size_average", "reduce"):
        if p.get(flag) is not None:
            return ix.refuse(f"{kind} ({flag})", node)
    if p["reduction"] not in ("mean", "sum", "none"):
        return ix.refuse(f"{kind} (reduction={p['reduction']})", node)
    if kind == "cross_entropy":
        ignore = p["ignore_index"]
        if sp.num(p["label_smoothing"]) != 0.0:
            return ix.refuse("cross_entropy (label_smoothing)", node)
        if len(shapes[0]) != len(shapes[1]) + 1 or type(ignore) is not int:  # targets are class indices
            return ix.refuse("cross_entropy (probability targets)", node)
        return ix.emit("cross_entropy", "x", reduction=p["reduction"], ignore_index=ignore,
                       ignore_index_attr=hyper(ix, p, "ignore_index", ignore, int))
    if shapes[0] != shapes[1]:
        return ix.refuse(f"{kind} (broadcast)", node)
    name = "beta" if "beta" in p else "delta" if "delta" in p else None
    if name and sp.num(p[name]) is None:
        return ix.refuse(kind, node)
    return ix.emit("loss", "x", fn=LOSSES[kind], reduction=p["reduction"], param=name and sp.num(p[name]),
                   param_attr=name and hyper(ix, p, name, p[name], float))


def kl_div(ix, node: fx.Node, p: dict):
    """kl_div(log_softmax(a, d), log_softmax(b, d), log_target=True) of the first two inputs, fused."""
    lp, lq = ix.value(node.args[0]), ix.value(p["target"])
    shapes = ix.shapes()
    if isinstance(lp, LogSoftmaxIn) and isinstance(lq, LogSoftmaxIn) and (lp.index, lq.index) == (0, 1) \
            and lp.dim == lq.dim and p["log_target"] is True and p["size_average"] is None \
            and p["reduce"] is None and p["reduction"] in ("batchmean", "sum", "mean") and len(shapes) >= 2 \
            and shapes[0] is not None and shapes[0] == shapes[1]:
        return ix.emit("kl_div_logits", "x", dim=lp.dim, reduction=p["reduction"])
    for v in (lp, lq):  # the pending log_softmaxes, as they would have been without the fusion
        if isinstance(v, LogSoftmaxIn) and v.index == 0:
            ix.emit("log_softmax", "x", dim=v.dim)
        elif isinstance(v, LogSoftmaxIn):
            ix.note("log_softmax")
    return ix.refuse("kl_div", node)


def _function(kind: str):
    def handle(ix, node):
        name, p = call(node, SPECS[kind])
        if p is None:
            return ix.refuse(name, node)
        return kl_div(ix, node, p) if kind == "kl_div" else loss(ix, kind, node, p)
    return handle


def _module(ix, node, mod):
    """A loss module called on (prediction, target): its functional form's parameters read from the instance,
    its hyper-parameters read by the generated code from the module at run time ("module": its path)."""
    if len(node.args) != 2 or node.kwargs:
        return ix.refuse(type(mod).__name__.lower(), node)
    kind = MODULES[type(mod)]
    weight = Attr(f"{node.target}.weight") if getattr(mod, "weight", None) is not None else None
    p = {**{n: getattr(mod, n, d) for n, d in SPECS[kind]}, "target": node.args[1], "weight": weight,
         "module": node.target}
    return loss(ix, kind, node, p)


RECOGNIZER = Recognizer(modules={cls: _module for cls in MODULES},
                        functions={getattr(F, k): _function(k) for k in (*LOSSES, "kl_div")})
