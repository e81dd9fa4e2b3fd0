"""Several kernel files in one: each file's module-level names given a prefix of its own, through its syntax tree.

A reassembled model is one file (the verifier runs a candidate as one file, and its guards refuse the imports a
loader of other files would need), yet each region's kernel is a whole file of its own whose names (`ModelNew`,
`Model`, `kc_linear_kernel`, a block size) may clash with another region's. So each file's module-level
definitions are renamed `<prefix><name>` wherever they are read, with Python's scoping respected: a function's
parameters and its own assignments are its locals and keep their names (unless it declares them `global`), a
class body's names are the class's. Imports keep their names (one module under one name is the same thing in
every file); two files that import different things under one name cannot share a file, and say so.

Names inside strings (CUDA source, a kernel's symbol looked up by name) are not Python names and are left alone:
each region's CUDA code is compiled as a module of its own, where its symbols cannot clash.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kernelcraft import syntax
from kernelcraft.errors import KernelcraftError


class NamespaceError(KernelcraftError):
    """Kernel files that cannot share one file."""


@dataclass
class Prefixed:
    body: str  # the file without its imports, its module-level names prefixed
    imports: list[str]  # its import statements, as written (one per line)
    future: bool  # it has `from __future__ import annotations`
    names: dict[str, str]  # its module-level names -> their new names


def prefixed(source: str, prefix: str) -> Prefixed:
    """`source` with every module-level name it defines renamed `prefix + name` (imports kept as they are)."""
    tree = syntax.parse(source)
    future = any(isinstance(s, ast.ImportFrom) and s.module == "__future__" for s in tree.body)
    imports = [ast.unparse(s) for s in tree.body
               if isinstance(s, ast.Import) or (isinstance(s, ast.ImportFrom) and s.module != "__future__")]
    imported = {a.asname or a.name.split(".")[0] for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))
                for a in s.names}
    defined = {n for n in _bound(tree.body) if not n.startswith("__")} - imported
    names = {n: prefix + n for n in sorted(defined)}
    tree.body = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
    _Renamer(names).visit(tree)
    return Prefixed(ast.unparse(ast.fix_missing_locations(tree)), imports, future, names)


def merged_imports(files: list[Prefixed]) -> list[str]:
    """The import lines of several files, each once; a name two files import as different things is an error."""
    lines: list[str] = []
    bound: dict[str, str] = {}
    for file in files:
        for line in file.imports:
            for statement in syntax.parse(line).body:
                for alias in statement.names:
                    name = alias.asname or alias.name.split(".")[0]
                    origin = _origin(statement, alias)
                    if bound.setdefault(name, origin) != origin:
                        raise NamespaceError(f"two kernels import different things as {name!r} ({bound[name]}; "
                                             f"{origin}); they cannot share one file")
            if line not in lines:
                lines.append(line)
    return lines


def _origin(statement: ast.stmt, alias: ast.alias) -> str:
    if isinstance(statement, ast.Import):
        return alias.name if alias.asname else alias.name.split(".")[0]
    return f"{'.' * statement.level}{statement.module}.{alias.name}"


# -- which names a block binds ----------------------------------------------------------------------------------

def _bound(body: list[ast.stmt]) -> set[str]:
    """The names statements bind in their own scope (nested functions' and classes' insides excluded)."""
    names: set[str] = set()
    for statement in body:
        names |= _binds(statement)
    return names


def _binds(node: ast.AST) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {a.asname or a.name.split(".")[0] for a in node.names}
    if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        return set()
    names: set[str] = set()
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        names.add(node.id)
    elif isinstance(node, ast.ExceptHandler) and node.name:
        names.add(node.name)
    elif isinstance(node, ast.NamedExpr):
        names.add(node.target.id)
    for child in ast.iter_child_nodes(node):
        names |= _binds(child)
    return names


def _locals(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    args = node.args
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    params |= {a.arg for a in (args.vararg, args.kwarg) if a}
    if isinstance(node, ast.Lambda):
        return params
    declared = {n for s in ast.walk(node) if isinstance(s, (ast.Global, ast.Nonlocal)) for n in s.names}
    return (params | _bound(node.body)) - declared


class _Renamer(ast.NodeTransformer):
    """Renames module-level names where they mean the module-level binding."""

    def __init__(self, names: dict[str, str]):
        self.names = names
        self.shadowed: list[set[str]] = []  # the names local to each enclosing function or class body
        self.depth = 0  # definitions nested in a function or class keep their names

    def _rename(self, name: str) -> str:
        if name in self.names and not any(name in scope for scope in self.shadowed):
            return self.names[name]
        return name

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self._rename(node.id)
        return node

    def visit_Global(self, node: ast.Global) -> ast.Global:
        node.names = [self.names.get(n, n) for n in node.names]
        return node

    def _function(self, node):
        # decorators, defaults and annotations are read in the enclosing scope; the body in the function's own
        for part in node.decorator_list + node.args.defaults + [d for d in node.args.kw_defaults if d]:
            self.visit(part)
        for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs + \
                [a for a in (node.args.vararg, node.args.kwarg) if a]:
            if arg.annotation:
                self.visit(arg.annotation)
        if node.returns:
            self.visit(node.returns)
        if not self.depth:
            node.name = self.names.get(node.name, node.name)
        self.shadowed.append(_locals(node))
        self.depth += 1
        for statement in node.body:
            self.visit(statement)
        self.depth -= 1
        self.shadowed.pop()
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_Lambda(self, node: ast.Lambda) -> ast.Lambda:
        for part in node.args.defaults + [d for d in node.args.kw_defaults if d]:
            self.visit(part)
        self.shadowed.append(_locals(node))
        self.visit(node.body)
        self.shadowed.pop()
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        for part in node.decorator_list + node.bases + [k.value for k in node.keywords]:
            self.visit(part)
        if not self.depth:
            node.name = self.names.get(node.name, node.name)
        # a class body's own names shadow the module's only in the class body itself, not in its methods
        own = _bound(node.body)
        self.depth += 1
        for statement in node.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.visit(statement)
            else:
                self.shadowed.append(own)
                self.visit(statement)
                self.shadowed.pop()
        self.depth -= 1
        return node
