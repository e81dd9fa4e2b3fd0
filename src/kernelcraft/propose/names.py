"""What a piece of Python source defines at module level and which names it reads without defining
them, from its syntax tree: enough to tell that a `ModelNew` block leans on a helper block written
before it (a kernel, a `load_inline` call, constants)."""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

from kernelcraft import syntax

_BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__builtins__"}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


@dataclass
class Names:
    tree: ast.Module
    defines: set[str]  # bound at module level (assignments, defs, imports, loop targets, …)
    free: set[str]  # read somewhere, bound nowhere in the source, not builtins
    imports: set[str]  # bound at module level by import statements


def names(source: str) -> Names | None:
    """None when the source is not Python (a syntax error, a CUDA block without a language tag)."""
    try:
        tree = syntax.parse(source)
    except (SyntaxError, ValueError):
        return None
    bound, read = set(), set()
    for node in ast.walk(tree):
        bound |= _binds(node)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            read.add(node.id)
    defines, imports = set(), set()
    for node in _module_level(tree):
        defines |= _binds(node)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports |= _binds(node)
    return Names(tree, defines, read - bound - _BUILTINS, imports)


def _binds(node: ast.AST) -> set[str]:
    """The names one node binds in the scope it sits in."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        return {node.id}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
    if isinstance(node, ast.arg):
        return {node.arg}
    if isinstance(node, ast.ExceptHandler) and node.name:
        return {node.name}
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return {node.name}
    if isinstance(node, ast.MatchMapping) and node.rest:
        return {node.rest}
    return set()


def _module_level(tree: ast.Module):
    """Every node whose bindings land in the module's scope: a walk that yields a def or class but
    does not enter it (nor a lambda or a comprehension, whose names are their own)."""
    stack = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _SCOPES):
            continue
        for child in reversed(list(ast.iter_child_nodes(node))):
            if isinstance(child, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)):
                continue
            stack.append(child)
