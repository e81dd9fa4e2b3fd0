"""How a transposed 3-D conv is read from a traced reference: nn.ConvTranspose3d (its hyper-parameters then read
from the module at run time) and F.conv_transpose3d / torch.conv_transpose3d (the values passed; groups by
attribute where forward reads it from one), with a weight (and bias) the module holds. The pointwise ops after it
fold into its epilogue (the family's `epilogue`). Refused, in words: a padding_mode other than zeros, a call with
output_size (the output's size chosen per call), an output_padding not below the stride or the dilation (torch
refuses it too), and hyper-parameters or tensors it cannot read."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from kernelcraft.propose.builtin.recognize import Recognizer
from kernelcraft.propose.builtin.values import Attr, Ew

KIND = "conv_transpose3d"
_CALL = ("weight", "bias", "stride", "padding", "output_padding", "groups", "dilation")  # F.conv_transpose3d's order


def _triple(value, least: int) -> list[int] | None:
    """An int or a 3-sequence of ints, each at least `least`, as [d, h, w]; None if it is not one."""
    vals = [value] * 3 if type(value) is int else list(value) if isinstance(value, (tuple, list)) else []
    return vals if len(vals) == 3 and all(type(v) is int and v >= least for v in vals) else None


def _emit(ix, node, stride, padding, output_padding, dilation, groups, weight: str, bias: str | None,
          mode: str = "zeros", module: str | None = None):
    if mode != "zeros":
        return ix.refuse(f"{KIND} (padding_mode={mode})", node)
    hyper = {"stride": _triple(stride, 1), "padding": _triple(padding, 0),
             "output_padding": _triple(output_padding, 0), "dilation": _triple(dilation, 1)}
    chain = ix.realize(ix.value(node.args[0]))
    if None in hyper.values() or not isinstance(chain, Ew) or type(groups) is not int or groups < 1:
        return ix.refuse(KIND, node)
    if any(o >= max(s, d) for o, s, d in zip(hyper["output_padding"], hyper["stride"], hyper["dilation"])):
        return ix.refuse(f"{KIND} (output_padding not below stride or dilation)", node)
    return ix.emit(KIND, ix.emit_chain(chain).base, **hyper, groups=groups, module=module,
                   groups_attr=ix.attr_name(groups, int), weight=weight, bias=bias, steps=[])


def _module(ix, node, mod: nn.ConvTranspose3d):
    if len(node.args) != 1 or node.kwargs:  # forward(x, output_size): the output's size chosen per call
        return ix.refuse(f"{KIND} (output_size)", node)
    return _emit(ix, node, mod.stride, mod.padding, mod.output_padding, mod.dilation, mod.groups,
                 f"{node.target}.weight", f"{node.target}.bias" if mod.bias is not None else None, mod.padding_mode,
                 node.target)


def _held(ix, value, dims: int | None) -> bool:
    """Whether `value` is a parameter or buffer of the model (of `dims` dims, when given)."""
    if not isinstance(value, Attr):
        return False
    held = dict(ix.model.named_parameters()) | dict(ix.model.named_buffers())
    t = held.get(value.path)
    return isinstance(t, torch.Tensor) and (dims is None or t.dim() == dims)


def _call(ix, node):
    """F.conv_transpose3d(x, weight, bias, stride, padding, output_padding, groups, dilation), torch's order."""
    given = dict(zip(_CALL, node.args[1:]), **node.kwargs)
    w, b = ix.value(given.get("weight")), ix.value(given.get("bias"))
    if len(node.args) > 1 + len(_CALL) or set(given) - set(_CALL) or not _held(ix, w, 5) \
            or not (b is None or _held(ix, b, 1)):
        return ix.refuse(KIND, node)
    return _emit(ix, node, given.get("stride", 1), given.get("padding", 0), given.get("output_padding", 0),
                 given.get("dilation", 1), given.get("groups", 1), w.path, b.path if b is not None else None)


RECOGNIZER = Recognizer(modules={nn.ConvTranspose3d: _module},
                        functions={f: _call for f in (F.conv_transpose3d, torch.conv_transpose3d)})
