"""Tensors forward makes or measures, read by analyze.py's interpreter: parameters and fx's constants of numbers made
tensors (`torch.tensor(self.c)`), `torch.tensor(c, device=x.device)`, the sizes of values that are not forward
inputs (`t.size(0)`, read at run time where a view takes them), and `torch.cat`. A mixin: the methods use the
interpreter's own (value, realize, emit, emit_chain, refuse, note, ...)."""

from __future__ import annotations

import operator

import torch
from torch import fx

from kernelcraft.propose.builtin import spellings as sp
from kernelcraft.propose.builtin.values import UNKNOWN, X, Attr, AttrView, Device, Ew, SizePow, TensorShape, TensorSize


class TensorOps:
    def get_attr(self, node: fx.Node):
        """A parameter or buffer of the model (Attr), or a one-element tensor forward made from a number while it was
        traced (torch.tensor(self.c): fx keeps it as a constant of the GraphModule, which ModelNew does not have): that
        number, so the steps that read it take it as a number (read from self.c at run time when forward reads it
        there, scalars.py)."""
        try:
            self.model.get_parameter(node.target) if node.target in dict(self.model.named_parameters()) \
                else self.model.get_buffer(node.target)
            return Attr(node.target)
        except AttributeError:
            pass
        value = getattr(self.gm, node.target, None)
        if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype.is_floating_point:
            return float(value.item())
        self.note("a tensor made in forward")
        return UNKNOWN

    def attr_view(self, node: fx.Node) -> AttrView | None:
        """self.b.view(1, -1, 1, 1) (or reshape, unsqueeze, squeeze, as a method or torch function, one after
        another) of a parameter or buffer, with literal int arguments: a tensor operand read through those views at
        run time; else None."""
        methods = {torch.reshape: "reshape", torch.unsqueeze: "unsqueeze", torch.squeeze: "squeeze"}
        method = node.target if node.op == "call_method" else \
            methods.get(node.target) if node.op == "call_function" else None
        if method not in ("view", "reshape", "unsqueeze", "squeeze") or not node.args or node.kwargs \
                or not isinstance(base := self.value(node.args[0]), (Attr, AttrView)):
            return None
        rest = node.args[1:]
        args = tuple(rest[0]) if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else tuple(rest)
        if not all(type(a) is int for a in args) or (method in ("unsqueeze", "squeeze") and len(args) > 1):
            return None
        return AttrView(base.path, (*(base.views if isinstance(base, AttrView) else ()), (method, args)))

    def number_tensor(self, node: fx.Node):
        """x.device (a Device, read by what follows), and torch.tensor(number[, device=x.device]) as the number;
        else None."""
        args = node.args
        if node.op == "call_function" and node.target is getattr and len(args) == 2 and args[1] == "device":
            return Device()
        if node.op == "call_function" and node.target is torch.tensor and len(args) == 1 \
                and sp.num(args[0]) is not None and set(node.kwargs) <= {"device"} \
                and isinstance(self.value(node.kwargs.get("device", Device())), Device):
            return float(args[0])
        return None

    def tensor_size(self, node: fx.Node):
        """t.size(d), t.size(), t.shape and t.shape[d] of a value that is not a forward input (inputs: size_of); a
        size is read at run time where a view takes it (TensorSize); else None."""
        args = node.args
        if not args or not isinstance(args[0], fx.Node) or args[0] in self.inputs:
            return None
        if node.op == "call_method" and node.target == "size" and not node.kwargs and len(args) <= 2:
            return TensorSize(args[0], args[1]) if len(args) == 2 and type(args[1]) is int else \
                TensorShape(args[0]) if len(args) == 1 else None
        if node.op == "call_function" and node.target is getattr and args[1:] == ("shape",):
            return TensorShape(args[0])
        if node.op == "call_function" and node.target is operator.getitem and len(args) == 2 \
                and isinstance(shape := self.value(args[0]), TensorShape) and type(args[1]) is int:
            return TensorSize(shape.node, args[1])
        return None

    def cat(self, node: fx.Node):
        """torch.cat(tensors, dim) of values it can read: a cat op (its parts emitted first)."""
        given = dict(zip(("tensors", "dim"), node.args), **node.kwargs)
        parts, dim = given.get("tensors"), given.get("dim", 0)
        if set(given) - {"tensors", "dim"} or not isinstance(parts, (list, tuple)) or not parts or type(dim) is not int:
            return self.refuse("cat", node)
        chains = [self.realize(self.value(p)) for p in parts]
        if not all(isinstance(c, Ew) for c in chains):
            return self.refuse("cat", node)
        refs = [self.emit_chain(c).base for c in chains]
        return self.emit("cat", refs[0], dim=dim, parts=refs)

    def size_entry(self, v):
        """A view's size argument as its detail's entry: an int, or ["size", ref, dim] for a size read at run time
        (of a value, or of a forward input); None when it is neither."""
        if type(v) is int:
            return v
        if isinstance(v, SizePow) and v.power == 1.0 and v.coef == 1.0:
            return ["size", X if v.index == 0 else ("input", v.index), v.dim]
        if isinstance(v, TensorSize) and isinstance(chain := self.realize(self.value(v.node)), Ew):
            return ["size", self.emit_chain(chain).base, v.dim]
        return None

    def is_operand(self, arg) -> bool:
        """Whether a call's argument is a tensor or a number made a tensor (not a dim, a size or None)."""
        v = self.value(arg)
        return isinstance(v, float) or (isinstance(arg, fx.Node) and not isinstance(v, (int, tuple, list)))
