"""How convolutions are read from a traced reference: nn.Conv1d / nn.Conv2d modules and F.conv1d / F.conv2d (torch.*)
calls with a weight (and bias) read from the module. `conv` and the handlers serve any dimension (conv3d's recognizer
claims nn.Conv3d and F.conv3d with them): a 1-D conv is kind conv1d with its hyper-parameters lifted to a one-row
2-D conv's. The pointwise steps, batchnorm and pooling that follow fold in later (analyze.py)."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelcraft.propose.builtin.recognize import Recognizer
from kernelcraft.propose.builtin.values import Attr, Ew


def conv(ix, node, wshape, stride, padding, dilation, groups, weight: str, bias, mode="zeros", module=None):
    """A 2-D or 3-D conv, or a 1-D one (a 3-D weight: kind conv1d, its hyper-parameters lifted to a one-row 2-D
    conv's). module: the nn.Conv*d's path, whose hyper-parameters the kernel then reads at run time (they may
    depend on sizes, as groups does in a depthwise conv); else the values, groups by attribute if read so."""
    dims = len(wshape) - 2

    def pair(v, lift):  # as [h, w] ([d, h, w]); a 1-D conv's h is `lift` (stride and dilation 1, padding 0)
        vals = [int(v)] * dims if isinstance(v, int) else [int(u) for u in v]
        return None if len(vals) != dims else [lift, *vals] if dims == 1 else vals

    if dims not in (1, 2, 3):
        return ix.refuse(f"conv{dims}d", node)
    kind = f"conv{dims}d"
    stride, dilation = pair(stride, 1), pair(dilation, 1)
    if padding == "valid":
        padding = 0
    elif padding == "same" and dilation and all(d * (k - 1) % 2 == 0 for d, k in zip(dilation[-dims:], wshape[2:])):
        padding = [d * (k - 1) // 2 for d, k in zip(dilation[-dims:], wshape[2:])]
    padding = pair(padding, 0) if not isinstance(padding, str) else None
    if mode != "zeros":
        return ix.refuse(f"{kind} (padding_mode={mode})", node)
    chain = ix.realize(ix.value(node.args[0]))
    if None in (stride, padding, dilation) or not isinstance(chain, Ew) or not isinstance(groups, int):
        return ix.refuse(kind, node)
    extra = {"pool": None} if dims < 3 else {}
    return ix.emit(kind, ix.emit_chain(chain).base, stride=stride, padding=padding, dilation=dilation,
                   groups=groups, module=module, groups_attr=ix.attr_name(groups, int), weight=weight,
                   bias=bias, steps=[], **extra)


def conv_module(ix, node, mod):
    """self.conv(x): the module's hyper-parameters, read again at run time by the kernel's forward."""
    if len(node.args) != 1 or node.kwargs:
        return ix.refuse(type(mod).__name__.lower(), node)
    return conv(ix, node, mod.weight.shape, mod.stride, mod.padding, mod.dilation, mod.groups,
                f"{node.target}.weight", f"{node.target}.bias" if mod.bias is not None else None,
                mod.padding_mode, module=node.target)


_FUNCTION_KINDS = {F.conv1d: "conv1d", torch.conv1d: "conv1d", F.conv2d: "conv2d", torch.conv2d: "conv2d",
                   F.conv3d: "conv3d", torch.conv3d: "conv3d"}


def conv_call(ix, node):
    """F.conv1d / F.conv2d / F.conv3d (and torch.*) with a weight (and bias) read from the module."""
    kind = _FUNCTION_KINDS[node.target]
    names = ("weight", "bias", "stride", "padding", "dilation", "groups")
    given = dict(zip(names, node.args[1:]), **node.kwargs)
    w, b = ix.value(given.get("weight")), ix.value(given.get("bias"))
    if len(node.args) > 7 or set(given) - set(names) or not isinstance(w, Attr) or \
            not (b is None or isinstance(b, Attr)):
        return ix.refuse(kind, node)
    shape = tuple(ix.gm.get_parameter(w.path).shape) if w.path in dict(ix.gm.named_parameters()) else ()
    if len(shape) != int(kind[4]) + 2:
        return ix.refuse(kind, node)
    return conv(ix, node, shape, given.get("stride", 1), given.get("padding", 0), given.get("dilation", 1),
                given.get("groups", 1), w.path, b.path if b is not None else None)


RECOGNIZER = Recognizer(modules={nn.Conv1d: conv_module, nn.Conv2d: conv_module},
                        functions={f: conv_call for f, kind in _FUNCTION_KINDS.items() if kind != "conv3d"})
