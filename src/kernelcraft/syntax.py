"""Python source parsed safely from many threads.

CPython 3.11's `ast` module keeps the depth of the tree it is converting in per-interpreter state, so two
threads parsing at once can fail with "SystemError: AST constructor recursion depth mismatch" (CPython
gh-106905, fixed in later releases). kernelcraft parses in threads (answers in the search's pool, kernels the
built-in engineer renders, guards in the verifier, problems loaded by a server's tool calls), so every parse,
and every compile of a parsed tree, goes through one lock."""

from __future__ import annotations

import ast
import threading

LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    with LOCK:
        return ast.parse(source, filename, mode)


def literal_eval(text: str):
    """ast.literal_eval of `text`, parsed under the lock."""
    return ast.literal_eval(parse(text.strip(), mode="eval"))


def compile_tree(tree: ast.AST, filename: str, mode: str = "exec"):
    """A parsed (and perhaps edited) tree compiled to code, under the lock."""
    with LOCK:
        return compile(tree, filename, mode)


def bound_names(node: ast.stmt) -> list[str]:
    """The names a top-level assignment binds (`a = b = 1`, `a, b = 1, 2`, `a: int = 1`, `a += 1`)."""
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
        targets = [node.target]
    else:
        return []
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
