"""Regions that are one problem: the same ops on inputs of the same shapes, dtypes and layouts, reading parameters
of the same shapes and dtypes (a transformer's blocks are a few problems, each with one instance a layer). Such a problem is
optimized once, at its instances' summed share of the model's time, and its kernel replaces every instance, each
bound to its own weights.

A region's signature leaves out every name: each node is its position in the region's graph, each parameter its
shape and dtype (the weights differ from layer to layer; a kernel reads them at run time), and each buffer or value
held from parameters alone (a mask, a position table) its values too, since a kernel may be specialised to them.
"""

from __future__ import annotations

import hashlib

import torch
from torch import fx

from kernelcraft.apply.extract import Region


def signature(region: Region) -> str:
    """A digest of what a kernel for the region depends on: equal for two regions whose problems are one."""
    module = region.module
    index: dict[fx.Node, int] = {}
    parameters = {name for name, _ in module.named_parameters()}

    def arg(a):
        return fx.node.map_aggregate(a, lambda x: ("%", index[x]) if isinstance(x, fx.Node) else _constant(x))

    parts: list = [tuple(m.spec for m in region.input_meta)]  # strides too: a kernel meets them
    for i, node in enumerate(module.graph.nodes):
        index[node] = i
        if node.op == "placeholder":
            parts.append(("input",))
        elif node.op == "get_attr":
            value = _fetch(module, node.target)
            if node.target in parameters or not isinstance(value, torch.Tensor):
                shape, dtype = tuple(getattr(value, "shape", ())), str(getattr(value, "dtype", type(value)))
                parts.append(("parameter", shape, dtype))
            else:
                parts.append(("held", tuple(value.shape), str(value.dtype), _digest(value)))
        elif node.op == "call_module":
            parts.append(("module", repr(module.get_submodule(node.target)), arg(node.args), arg(node.kwargs)))
        else:
            parts.append((node.op, _target(node.target), arg(node.args), arg(node.kwargs)))
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def instances(regions: list[Region]) -> dict[str, str]:
    """Each region's name -> the name of the first region (in running order) of its problem: its own where it is
    the first or the only one."""
    first: dict[str, str] = {}
    like = {}
    for region in regions:
        like[region.name] = first.setdefault(signature(region), region.name)
    return like


def slots(region: Region, like: Region) -> dict[str, str]:
    """The tensors a kernel written for `like`'s problem holds, by the names that problem gave them -> the names
    `region`'s problem gives the same tensors (one signature: the same held tensors in the same order)."""
    theirs, ours = list(like.held), list(region.held)
    if len(theirs) != len(ours):
        raise ValueError(f"regions {like.name} and {region.name} hold different tensors; they are not one problem")
    return dict(zip(theirs, ours))


def _fetch(module: torch.nn.Module, target: str):
    owner, _, leaf = target.rpartition(".")
    return getattr(module.get_submodule(owner) if owner else module, leaf)


def _target(target) -> str:
    if isinstance(target, str):
        return target
    name = getattr(target, "__qualname__", getattr(target, "__name__", repr(target)))
    return f"{getattr(target, '__module__', '')}.{name}"


def _constant(x):
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), str(x.dtype), _digest(x))
    if isinstance(x, (torch.dtype, torch.device, torch.memory_format, torch.layout)):
        return str(x)
    return x


def _digest(t: torch.Tensor) -> str:
    data = t.detach().cpu().contiguous().reshape(-1)
    if data.dtype != torch.bool:
        data = data.view(torch.uint8)  # its bytes, whatever numpy makes of the dtype (bfloat16, float8)
    return hashlib.sha256(data.numpy().tobytes()).hexdigest()[:16]
