"""A built-in candidate file: the reference verbatim, a header, the kernels, and `class ModelNew(Model)`.

Used by registry.py (one op) and chain.py (several): `ModelNew` keeps the reference's
forward signature; its body reads the first input as `x` (made contiguous), or, for a kind whose family
declares the inputs it reads (`inputs`: their names in the body, e.g. ("a", "b") or ("q", "k", "v")), the
first len(inputs) inputs under those names as passed, then runs the family's body. The numbers forward reads
from the module for the op's kernels (`scalars`, the op's scalars.Scalars) are read first, into the names the
body passes at its launches.
"""

from __future__ import annotations

import ast

from kernelcraft import syntax
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.codegen import indent


def compose(reference_source: str, head: str, kernels: list[str], body: str, inputs: tuple[str, ...] | None,
            kind: str, scalars: Scalars = Scalars()) -> str:
    signature, names = forward_signature(reference_source)
    if inputs:
        if len(names) < len(inputs):
            raise ValueError(f"a {kind} reference needs a forward(self, {', '.join(n.upper() for n in inputs)}, ...)")
        first = f"{', '.join(inputs)} = {', '.join(names[:len(inputs)])}\n"
    else:
        first = f"x = {names[0]}.contiguous()\n"
    return assemble(reference_source, head, kernels, scalars.reads() + first + body.strip("\n"))


def assemble(reference_source: str, head: str, kernels: list[str], body: str) -> str:
    """The file: reference, head, kernels, then ModelNew whose forward (the reference's signature) runs `body`."""
    signature, _ = forward_signature(reference_source)
    forward = f"class ModelNew(Model):\n    {signature}\n" + indent(body.strip("\n"), 8)
    return "\n\n\n".join(part.strip("\n") for part in (reference_source, head, *kernels, forward)) + "\n"


def parse(source: str) -> ast.Module:
    """ast.parse, safe across the search's threads (syntax.py)."""
    return syntax.parse(source)


def forward_signature(source: str) -> tuple[str, list[str]]:
    """(the reference forward's `def` line, the names of its positional inputs)."""
    tree = parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "forward":
                    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
                    if len(names) >= 2:
                        ret = f" -> {ast.unparse(fn.returns)}" if fn.returns is not None else ""
                        return f"def forward({ast.unparse(fn.args)}){ret}:", names[1:]
    raise ValueError("the reference has no `class Model` with a forward(self, x, ...)")
