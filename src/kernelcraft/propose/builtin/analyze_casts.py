"""Float casts, read by analyze.py's interpreter: `x.float()`, `x.to(dtype)`, `h.to(x.dtype)` (an input's dtype, read
from the problem's inputs) and ATen's `_to_copy(x, dtype=...)` of an export graph. A cast to float32 is the identity
of the fp32 math every kernel computes in; a cast to bfloat16 or float16 is a rounding step (an RMSNorm's
h.to(x.dtype) before its weight). The kernels write their first input's dtype: once the forward is read, a forward
that casts is covered only where its output keeps it. A mixin: the methods use the interpreter's own (value,
apply_step, note, inputs, _input_meta, _output_dtype)."""

from __future__ import annotations

import torch
from torch import fx

from kernelcraft.propose.builtin import spellings as sp


def output_dtype(model, get_inputs) -> str | None:
    """The dtype of `model`'s output on the problem's inputs (asked only where the forward casts), or None."""
    try:
        with torch.no_grad():
            out = model(*get_inputs())
        return str(out.dtype).removeprefix("torch.") if isinstance(out, torch.Tensor) else None
    except Exception:  # noqa: BLE001 - a forward that cannot run here: not covered, said by check_casts
        return None


class CastOps:
    def casted(self, node: fx.Node):
        """The value of a cast, or of an input's `.dtype` a cast reads; None where `node` is neither."""
        if node.op == "call_function" and node.target is getattr and node.args[1:] == ("dtype",) \
                and (dtype := self.input_dtype(node.args[0])) is not None:
            return dtype  # a constant, read by a cast (h.to(x.dtype))
        if (dtype := sp.cast_dtype(node, lambda a: self.value(a) if isinstance(a, fx.Node) else a)) is not None:
            return self.cast(node, dtype)
        return None

    def cast(self, node: fx.Node, dtype: torch.dtype):
        """A float cast: to float32 the identity, to bfloat16 or float16 a rounding step (check_casts follows)."""
        self.casts = True
        a = self.value(node.args[0])
        if dtype == torch.float32:
            return a
        return self.apply_step(a, sp.CAST_STEPS[dtype], f"to({str(dtype).removeprefix('torch.')})", node)

    def input_dtype(self, node) -> torch.dtype | None:
        """The dtype of the forward's input `node` (a placeholder), where the problem's inputs say it."""
        index = self.inputs.get(node) if isinstance(node, fx.Node) else None
        meta = self._input_meta() if index is not None else []
        found = meta[index] if index is not None and index < len(meta) and meta[index] else None
        dtype = getattr(torch, found[1], None) if found else None
        return dtype if isinstance(dtype, torch.dtype) else None

    def check_casts(self) -> None:
        """A forward that casts is covered where its inputs are float16, bfloat16 or float32 (a cast to float32 of
        a float64 input would round) and its output has its first input's dtype. Nothing where it does not cast."""
        if not self.casts:
            return
        meta = self._input_meta()
        dtypes = [m[1] for m in meta if m is not None]
        if not dtypes or not set(dtypes) <= {"float16", "bfloat16", "float32"}:
            self.note("a dtype cast of other than float16, bfloat16 or float32 inputs")
        elif self._output_dtype() != dtypes[0]:
            self.note("a dtype cast that changes the output's dtype")
