"""Families still in the older layout (triton_families/: a module's `KINDS = {kind: (moves(op),
render(op, params))}` with moves as (text, category, params dict)), adapted to family.py's contract until each
moves to its own folder. Their parameters are a dict and their idea text is the module's own."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelcraft.propose.builtin.family import Family, Names, Params, Rendered
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.triton_families import (argreduce, attention, channel_norm, conv, conv3d,
                                                         conv_transpose, gemm, loss, pool, scan)


@dataclass(frozen=True)
class LegacyParams(Params):
    text: str = ""
    tag: str = ""
    values: dict = field(default_factory=dict)

    def idea(self) -> str:
        return self.text

    def category(self) -> str:
        return self.tag

    @property
    def relaxed(self) -> bool:
        return self.values.get("precision") == "tf32"

    def to_json(self) -> dict:
        return dict(self.values)

    def __getitem__(self, key):  # the old families' renders read params as a dict
        return self.values[key]

    def get(self, key, default=None):
        return self.values.get(key, default)

    def but(self, **changes):
        return type(self)(self.text, self.tag, {**self.values, **changes})


@dataclass(frozen=True)
class LegacyTritonParams(LegacyParams):
    pass


# the kinds whose kernels apply the pointwise steps after them, and of those the ones that read parameter operands
_EPILOGUE = {"gemm": ("linear", "matmul"), "conv": ("conv1d", "conv2d"),
             "conv3d": ("conv3d",), "conv_transpose": ("conv_transpose1d", "conv_transpose2d"),
             "channel_norm": ("batchnorm", "groupnorm", "instancenorm")}
_OPERAND_EPILOGUE = {"gemm": ("linear",), "conv": ("conv1d", "conv2d")}


def _family(module, backend: str, params: type[LegacyParams]) -> Family:
    table = module.KINDS

    def moves(op: Op) -> list[Params]:
        return [params(text, category, dict(values)) for text, category, values in table[op.kind][0](op)]

    def render(op: Op, p: LegacyParams, names: Names) -> Rendered:
        values = {**moves(op)[0].values, **p.values}
        kernels, body = table[op.kind][1](op, values)
        return Rendered(tuple(kernels), body)

    head = ("import math\n\nimport torch\nimport triton\nimport triton.language as tl" if backend == "triton" else
            "import math\n\nimport torch\n\nfrom kernelcraft.backends.nvrtc import load_kernels")
    name = module.__name__.rsplit(".", 1)[1]
    triton = backend == "triton"
    return Family(name, backend, tuple(table), params, moves, render, inputs=dict(getattr(module, "INPUTS", {})),
                  epilogue=_EPILOGUE.get(name, ()) if triton else (),
                  operand_epilogue=_OPERAND_EPILOGUE.get(name, ()) if triton else (), head=head)


_TRITON = (gemm, conv, conv3d, conv_transpose, pool, argreduce, scan, loss, channel_norm, attention)
FAMILIES = [_family(m, "triton", LegacyTritonParams) for m in _TRITON]
