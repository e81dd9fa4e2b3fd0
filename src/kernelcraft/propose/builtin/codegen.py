"""Shared by every family: how generated code names module attributes, numbers and indented blocks."""

from __future__ import annotations

import math
import re

from kernelcraft.propose.builtin import scalars


def attr(path: str) -> str:
    """`self.<path>` as Python: "ln.weight" -> self.ln.weight, "net.0.weight" -> self.net[0].weight."""
    if not re.fullmatch(r"\w+(\.\w+)*", path):
        raise ValueError(f"not an attribute path: {path!r}")
    return "self" + "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in path.split("."))


def indent(text: str, n: int) -> str:
    return "\n".join((" " * n + line) if line.strip() else "" for line in text.split("\n"))


def num(value) -> str:
    if scalars.is_ref(value):  # a number forward reads from the module: a kernel parameter (scalars.Scalars)
        return scalars.name(value)
    value = float(value)
    if math.isnan(value):
        return 'float("nan")'
    return repr(value) if math.isfinite(value) else ('float("inf")' if value > 0 else '-float("inf")')
