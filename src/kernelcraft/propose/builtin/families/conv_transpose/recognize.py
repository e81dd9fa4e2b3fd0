"""How transposed convolutions are read: nn.ConvTranspose2d / nn.ConvTranspose1d modules (their hyper-parameters
read again at run time; a 1-D one lifted to a one-row 2-D one) and F.conv_transpose2d (torch.*) calls with a weight
(and bias) read from the module."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelcraft.propose.builtin.recognize import Recognizer
from kernelcraft.propose.builtin.values import Attr, Ew


def conv_transpose(ix, node, stride, padding, output_padding, dilation, groups, weight: str, bias, mode="zeros",
                   module=None, dims=2):
    """A transposed 2-D conv of the raw input (nn.ConvTranspose2d: module, read at run time; else the values), or
    a 1-D one (nn.ConvTranspose1d, dims 1: kind conv_transpose1d, its hyper-parameters lifted to a one-row 2-D
    one's: stride and dilation [1, v], padding and output_padding [0, v])."""
    def pair(v, least):
        vals = [v] * dims if isinstance(v, int) else list(v) if isinstance(v, (tuple, list)) else []
        vals = [least, *vals] if dims == 1 else vals
        return [int(u) for u in vals] if len(vals) == 2 and all(type(u) is int and u >= least for u in vals) \
            else None

    kind = f"conv_transpose{dims}d"
    if mode != "zeros":
        return ix.refuse(f"{kind} (padding_mode={mode})", node)
    hyper = {"stride": pair(stride, 1), "padding": pair(padding, 0), "output_padding": pair(output_padding, 0),
             "dilation": pair(dilation, 1)}
    chain = ix.realize(ix.value(node.args[0]))
    if None in hyper.values() or not isinstance(chain, Ew) or type(groups) is not int:
        return ix.refuse(kind, node)
    if any(o >= max(s, d) for o, s, d in zip(hyper["output_padding"], hyper["stride"], hyper["dilation"])):
        return ix.refuse(f"{kind} (output_padding not below stride or dilation)", node)
    return ix.emit(kind, ix.emit_chain(chain).base, **hyper, groups=groups, module=module,
                   groups_attr=ix.attr_name(groups, int), weight=weight, bias=bias, steps=[])


def conv_transpose_module(ix, node, mod):
    """self.conv(x) of an nn.ConvTranspose1d/2d; forward(x, output_size) chooses sizes per call: not covered."""
    if len(node.args) != 1 or node.kwargs:
        return ix.refuse(f"conv_transpose{mod.weight.dim() - 2}d (output_size)", node)
    return conv_transpose(ix, node, mod.stride, mod.padding, mod.output_padding, mod.dilation, mod.groups,
                          f"{node.target}.weight", f"{node.target}.bias" if mod.bias is not None else None,
                          mod.padding_mode, node.target, mod.weight.dim() - 2)


def conv_transpose_call(ix, node):
    """F.conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation) (torch's order)."""
    names = ("weight", "bias", "stride", "padding", "output_padding", "groups", "dilation")
    given = dict(zip(names, node.args[1:]), **node.kwargs)
    w, b = ix.value(given.get("weight")), ix.value(given.get("bias"))
    if len(node.args) > 8 or set(given) - set(names) or not isinstance(w, Attr) or \
            not (b is None or isinstance(b, Attr)):
        return ix.refuse("conv_transpose2d", node)
    shape = tuple(ix.gm.get_parameter(w.path).shape) if w.path in dict(ix.gm.named_parameters()) else ()
    if len(shape) != 4:
        return ix.refuse("conv_transpose2d", node)
    return conv_transpose(ix, node, given.get("stride", 1), given.get("padding", 0), given.get("output_padding", 0),
                          given.get("dilation", 1), given.get("groups", 1), w.path, b.path if b is not None else None)


RECOGNIZER = Recognizer(modules={nn.ConvTranspose1d: conv_transpose_module, nn.ConvTranspose2d: conv_transpose_module},
                        functions={F.conv_transpose2d: conv_transpose_call, torch.conv_transpose2d: conv_transpose_call})
