"""How the norms over channels are read: F.batch_norm (eval: running statistics), F.instance_norm, F.group_norm and
their nn modules (BatchNorm*d, InstanceNorm*d, GroupNorm) over (N, C, *spatial), of a chain over an input or an
op's result. An eval batchnorm right after a conv folds into the conv's op (the interpreter decides:
ix.fold_batchnorm)."""

from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F
from torch import fx

from kernelcraft.propose.builtin import spellings as sp
from kernelcraft.propose.builtin.recognize import Recognizer, call, hyper
from kernelcraft.propose.builtin.values import Attr, Ew

# Each spelling's parameters after the input, in torch's order, with torch's defaults.
SPECS = {"batch_norm": [("running_mean", None), ("running_var", None), ("weight", None), ("bias", None),
                        ("training", False), ("momentum", 0.1), ("eps", 1e-5)],
         "instance_norm": [("running_mean", None), ("running_var", None), ("weight", None), ("bias", None),
                           ("use_input_stats", True), ("momentum", 0.1), ("eps", 1e-5)],
         "group_norm": [("num_groups", None), ("weight", None), ("bias", None), ("eps", 1e-5)]}
BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm, nn.LazyBatchNorm1d,
               nn.LazyBatchNorm2d, nn.LazyBatchNorm3d)
INSTANCE_NORMS = (nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d, nn.LazyInstanceNorm1d,
                  nn.LazyInstanceNorm2d, nn.LazyInstanceNorm3d)


def channel_norm(ix, kind: str, node: fx.Node, p: dict):
    """batch_norm (eval: running statistics), instance_norm or group_norm over (N, C, *spatial)."""
    chain = ix.realize(ix.value(node.args[0]))
    w, b = ix.value(p["weight"]), ix.value(p["bias"])
    stats = [ix.value(p.get(k)) for k in ("running_mean", "running_var")]
    if not isinstance(chain, Ew) or sp.num(p["eps"]) is None \
            or not all(v is None or isinstance(v, Attr) for v in (w, b, *stats)):
        return ix.refuse(kind, node)
    if kind == "batch_norm" and (p["training"] is not False or None in stats):
        return ix.refuse("batch_norm (training)", node)  # batch statistics, running buffers updated
    if kind == "instance_norm" and (stats != [None, None] or p["use_input_stats"] is not True):
        return ix.refuse("instance_norm (running stats)", node)
    if kind == "group_norm" and type(p["num_groups"]) is not int:
        return ix.refuse(kind, node)
    common = {"eps": float(p["eps"]), "eps_attr": hyper(ix, p, "eps", p["eps"], float), "weight": w and w.path,
              "bias": b and b.path}
    if kind == "batch_norm":
        bn = {**common, "running_mean": stats[0].path, "running_var": stats[1].path}
        if ix.fold_batchnorm(chain, bn):
            return chain
        return ix.emit("batchnorm", ix.emit_chain(chain).base, **bn)
    src = ix.emit_chain(chain).base
    if kind == "instance_norm":
        return ix.emit("instancenorm", src, **common, spatial=p.get("spatial"))
    groups = p["num_groups"]
    return ix.emit("groupnorm", src, groups=groups, groups_attr=hyper(ix, p, "num_groups", groups, int), **common)


def _function(kind: str):
    def handle(ix, node):
        name, p = call(node, SPECS[kind])
        if p is None:
            return ix.refuse(name, node)
        return channel_norm(ix, kind, node, p)
    return handle


def _module(ix, node, mod):
    """A norm module on one input: its functional form's parameters, tensors by attribute path, read from the
    instance ("module": its path, where the generated code reads eps and the groups at run time)."""
    if len(node.args) != 1 or node.kwargs:
        return ix.refuse(type(mod).__name__.lower(), node)

    def path(name: str) -> Attr | None:
        return Attr(f"{node.target}.{name}") if getattr(mod, name, None) is not None else None

    p = {"module": node.target, "weight": path("weight"), "bias": path("bias"), "eps": getattr(mod, "eps", None),
         "running_mean": path("running_mean"), "running_var": path("running_var")}
    if isinstance(mod, BATCH_NORMS):  # eval mode: the verifier runs models .eval()
        return channel_norm(ix, "batch_norm", node, {**p, "training": not mod.track_running_stats})  # else batch stats
    if isinstance(mod, INSTANCE_NORMS):  # spatial: its dims, to tell an unbatched input
        return channel_norm(ix, "instance_norm", node, {**p, "use_input_stats": True,
                                                        "spatial": mod._get_no_batch_dim() - 1})
    return channel_norm(ix, "group_norm", node, {**p, "num_groups": mod.num_groups})


RECOGNIZER = Recognizer(modules={cls: _module for cls in (*BATCH_NORMS, *INSTANCE_NORMS, nn.GroupNorm)},
                        functions={getattr(F, k): _function(k) for k in SPECS})
