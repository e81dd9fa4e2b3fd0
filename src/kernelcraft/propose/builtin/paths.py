"""How generated code reads a module attribute given by its path ("ln.weight", "net.0.weight"), and views of one."""

from __future__ import annotations

import re


def attr(path: str) -> str:
    """`self.<path>` as Python: "ln.weight" -> self.ln.weight, "net.0.weight" -> self.net[0].weight."""
    if not re.fullmatch(r"\w+(\.\w+)*", path):
        raise ValueError(f"not an attribute path: {path!r}")
    return "self" + "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in path.split("."))


def parameter(ref: tuple) -> str:
    """A parameter operand ("attr", path) as Python, or views of one ("attr", path, ((method, args), ...)) as forward
    wrote them: self.b.view(1, -1, 1, 1), self.b.unsqueeze(-1).unsqueeze(-1)."""
    text = attr(ref[1])
    for method, args in ref[2] if len(ref) > 2 else ():
        if method not in ("view", "reshape", "unsqueeze", "squeeze") or not all(type(a) is int for a in args):
            raise ValueError(f"not a view of a parameter: {ref!r}")
        text += f".{method}({', '.join(str(a) for a in args)})"
    return text
