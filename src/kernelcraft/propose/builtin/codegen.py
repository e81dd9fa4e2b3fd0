"""Shared by every family: how generated code writes numbers and indented blocks (module attributes: paths.py)."""

from __future__ import annotations

import math

from kernelcraft.propose.builtin import scalars


def indent(text: str, n: int) -> str:
    return "\n".join((" " * n + line) if line.strip() else "" for line in text.split("\n"))


def num(value) -> str:
    if scalars.is_ref(value):  # a number forward reads from the module: a kernel parameter (scalars.Scalars)
        return scalars.name(value)
    value = float(value)
    if math.isnan(value):
        return 'float("nan")'
    return repr(value) if math.isfinite(value) else ('float("inf")' if value > 0 else '-float("inf")')
