"""How losses are read: F.cross_entropy, F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.huber_loss and their nn modules,
of the forward's first two inputs as they are (prediction, target); F.kl_div(log_softmax(a, d), log_softmax(b, d),
log_target=True) of the first two inputs, fused into one op (the interpreter keeps a log_softmax of an input that
only a kl_div reads pending, values.LogSoftmaxIn; the kl_div decides here), and F.kl_div / nn.KLDivLoss of the
first input as log-probabilities, or of torch.log of it (the log fused), against the second as target; and
F.triplet_margin_loss / nn.TripletMarginLoss (p = 2) of the first three inputs as they are."""

from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F
from torch import fx

from kernelcraft.propose.builtin import spellings as sp
from kernelcraft.propose.builtin.recognize import Recognizer, call, hyper
from kernelcraft.propose.builtin.values import X, Attr, Ew, LogSoftmaxIn

# Each spelling's parameters after the prediction, in torch's order, with torch's defaults.
_LEGACY = [("size_average", None), ("reduce", None), ("reduction", "mean")]
SPECS = {"cross_entropy": [("target", None), ("weight", None), ("size_average", None), ("ignore_index", -100),
                           ("reduce", None), ("reduction", "mean"), ("label_smoothing", 0.0)],
         "mse_loss": [("target", None), *_LEGACY, ("weight", None)],
         "l1_loss": [("target", None), *_LEGACY, ("weight", None)],
         "smooth_l1_loss": [("target", None), *_LEGACY, ("beta", 1.0)],
         "huber_loss": [("target", None), ("reduction", "mean"), ("delta", 1.0), ("weight", None)],
         "kl_div": [("target", None), *_LEGACY, ("log_target", False)],
         "triplet_margin_loss": [("positive", None), ("negative", None), ("margin", 1.0), ("p", 2), ("eps", 1e-6),
                                 ("swap", False), *_LEGACY]}
LOSSES = {"cross_entropy": "cross_entropy", "mse_loss": "mse", "l1_loss": "l1", "smooth_l1_loss": "smooth_l1",
          "huber_loss": "huber"}  # spelling -> the loss op's kind ("cross_entropy") or fn
MODULES = {nn.CrossEntropyLoss: "cross_entropy", nn.MSELoss: "mse_loss", nn.L1Loss: "l1_loss",
           nn.SmoothL1Loss: "smooth_l1_loss", nn.HuberLoss: "huber_loss", nn.KLDivLoss: "kl_div",
           nn.TripletMarginLoss: "triplet_margin_loss"}


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
    """kl_div(log_softmax(a, d), log_softmax(b, d), log_target=True) of the first two inputs, fused; kl_div(a, b) or
    kl_div(log(a), b) (log-probabilities a, or probabilities whose log the kernel takes), any reduction and
    log_target."""
    lp, lq = ix.value(node.args[0]), ix.value(p["target"])
    shapes = ix.shapes()
    same = len(shapes) >= 2 and shapes[0] is not None and shapes[0] == shapes[1]
    plain = p["size_average"] is None and p["reduce"] is None and type(p["log_target"]) is bool
    if isinstance(lp, LogSoftmaxIn) and isinstance(lq, LogSoftmaxIn) and (lp.index, lq.index) == (0, 1) \
            and lp.dim == lq.dim and p["log_target"] is True and plain \
            and p["reduction"] in ("batchmean", "sum", "mean") and same:
        return ix.emit("kl_div_logits", "x", dim=lp.dim, reduction=p["reduction"])
    if lp in (Ew(X), Ew(X, (("log",),))) and lq == Ew(("input", 1)) and plain and same \
            and p["reduction"] in ("batchmean", "sum", "mean", "none"):
        return ix.emit("kl_div", "x", reduction=p["reduction"], log_target=p["log_target"],
                       log_input=lp != Ew(X))
    if not same and lq == Ew(("input", 1)) and isinstance(lp, Ew) and lp.base == X:
        return ix.refuse("kl_div (broadcast)", node)
    if not plain and not isinstance(lp, LogSoftmaxIn):
        return ix.refuse("kl_div (size_average or reduce)", node)
    for v in (lp, lq):  # the pending log_softmaxes, as they would have been without the fusion
        if isinstance(v, LogSoftmaxIn) and v.index == 0:
            ix.emit("log_softmax", "x", dim=v.dim)
        elif isinstance(v, LogSoftmaxIn):
            ix.note("log_softmax")
    return ix.refuse("kl_div", node)


def triplet_margin(ix, node: fx.Node, p: dict):
    """The triplet margin loss of the first three inputs as they are (anchor, positive, negative), of one shape:
    margin and eps read at run time (from the module, or from self.<attr>), p 2 only."""
    args = [node.args[0], p["positive"], p["negative"]]
    shapes = ix.shapes()
    if [ix.inputs.get(v) if isinstance(v, fx.Node) else None for v in args] != [0, 1, 2] or len(shapes) < 3 \
            or None in shapes[:3]:
        return ix.refuse("triplet_margin_loss", node)
    for flag in ("size_average", "reduce"):
        if p.get(flag) is not None:
            return ix.refuse(f"triplet_margin_loss ({flag})", node)
    if sp.num(p["p"]) != 2.0:
        return ix.refuse(f"triplet_margin_loss (p={p['p']})", node)
    if p["reduction"] not in ("mean", "sum", "none") or type(p["swap"]) is not bool:
        return ix.refuse("triplet_margin_loss", node)
    if not shapes[0] == shapes[1] == shapes[2] or not shapes[0]:
        return ix.refuse("triplet_margin_loss (broadcast)", node)
    margin, eps = sp.num(p["margin"]), sp.num(p["eps"])
    if margin is None or eps is None:
        return ix.refuse("triplet_margin_loss (a margin or eps computed in forward)", node)
    return ix.emit("triplet_margin", "x", margin=margin, margin_attr=hyper(ix, p, "margin", p["margin"], float),
                   eps=eps, eps_attr=hyper(ix, p, "eps", p["eps"], float), swap=p["swap"], reduction=p["reduction"])


_READERS = {"kl_div": kl_div, "triplet_margin_loss": triplet_margin}


def _function(kind: str):
    def handle(ix, node):
        name, p = call(node, SPECS[kind])
        if p is None:
            return ix.refuse(name, node)
        return _READERS[kind](ix, node, p) if kind in _READERS else loss(ix, kind, node, p)
    return handle


def _module(ix, node, mod):
    """A loss module called on (prediction, target), or a triplet loss's on (anchor, positive, negative): its
    functional form's parameters read from the instance, its hyper-parameters read by the generated code from the
    module at run time ("module": its path)."""
    kind = MODULES[type(mod)]
    operands = ("positive", "negative") if kind == "triplet_margin_loss" else ("target",)
    if len(node.args) != 1 + len(operands) or node.kwargs:
        return ix.refuse(type(mod).__name__.lower(), node)
    weight = Attr(f"{node.target}.weight") if getattr(mod, "weight", None) is not None else None
    p = {**{n: getattr(mod, n, d) for n, d in SPECS[kind]}, **dict(zip(operands, node.args[1:])), "weight": weight,
         "module": node.target}
    if kind in _READERS:  # (no weight: these modules have none)
        p["size_average"] = p["reduce"] = None  # the module's constructor turned them into its reduction
        return _READERS[kind](ix, node, p)
    return loss(ix, kind, node, p)


RECOGNIZER = Recognizer(modules={cls: _module for cls in MODULES},
                        functions={getattr(F, k): _function(k) for k in (*LOSSES, "kl_div", "triplet_margin_loss")})
