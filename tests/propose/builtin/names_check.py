"""Static checks of a generated candidate's names (ast): every name a generated function reads is its parameter,
its own local, a module-level name or a builtin; module-level code never reads `self` it was not given; the
numbers forward reads from the module (scalars.py) are read only in ModelNew.forward, every other function
receiving their values as arguments; and every launch or call of a generated function that takes such numbers
(kc_s_* parameters) passes them at their places, by the same names."""

import ast
import builtins

from tests.propose.builtin.kernel_check import _dotted

_BUILTINS = set(dir(builtins))
PREFIX = "kc_s_"  # scalars.PREFIX: the parameters that carry the numbers forward reads from the module


def _module_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def _own_names(fn: ast.FunctionDef) -> set[str]:
    """Its parameters and every name it binds (assignments, loop and comprehension targets, local imports)."""
    a = fn.args
    names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    names |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(x.asname or x.name).split(".")[0] for x in node.names}
        elif isinstance(node, ast.arg):
            names.add(node.arg)  # a lambda's
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node is not fn:
            names.add(node.name)
    return names


def generated_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """The generated module-level functions (kc_*: kernels and host helpers) and ModelNew's methods."""
    out = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("kc_")]
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"):
        out += [n for n in cls.body if isinstance(n, ast.FunctionDef)]
    return out


def _is_jit(fn: ast.FunctionDef) -> bool:
    return any(ast.unparse(d).startswith("triton.jit") for d in fn.decorator_list)


def check_names(source: str, scalar_paths=()) -> None:
    """Raise AssertionError naming each generated function that reads an unbound name, reads `self` at module
    level, or reads a scalar attribute (`scalar_paths`, e.g. "scale_factor") anywhere but ModelNew.forward."""
    tree = ast.parse(source)
    module = _module_names(tree)
    in_class = {id(n) for cls in tree.body if isinstance(cls, ast.ClassDef) for n in cls.body}
    problems = []
    for fn in generated_functions(tree):
        where = ("ModelNew." if id(fn) in in_class else "") + fn.name
        own = _own_names(fn)
        free = sorted({n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
                      - own - module - _BUILTINS)
        if free:
            problems.append(f"{where} reads unbound {free}")
        if id(fn) not in in_class and "self" in free:
            problems.append(f"module-level {where} reads self")
        if _is_jit(fn) and any(isinstance(n, ast.Name) and n.id == "self" for n in ast.walk(fn)):
            problems.append(f"kernel {where} names self")
        if where != "ModelNew.forward":
            for node in ast.walk(fn):
                if isinstance(node, ast.Attribute) and _dotted(node) in {f"self.{p}" for p in scalar_paths}:
                    problems.append(f"{where} reads the scalar {_dotted(node)}: only ModelNew.forward should")
    problems += _scalar_arguments(tree)
    assert not problems, "\n".join(problems)


def _scalar_arguments(tree: ast.Module) -> list[str]:
    """Each call f(...) or launch f[grid](...) of a generated function f: the arguments at the places of its kc_s_*
    parameters are those names."""
    params = {fn.name: [a.arg for a in fn.args.posonlyargs + fn.args.args] for fn in generated_functions(tree)}
    out = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        target = call.func.value if isinstance(call.func, ast.Subscript) else call.func
        if not isinstance(target, ast.Name) or target.id not in params:
            continue
        for i, name in enumerate(params[target.id]):
            if not name.startswith(PREFIX):
                continue
            arg = call.args[i] if i < len(call.args) else None
            if not (isinstance(arg, ast.Name) and arg.id == name):
                out.append(f"{ast.unparse(call)[:100]} passes {ast.unparse(arg) if arg else 'nothing'} for {name}")
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Name) and arg.id.startswith(PREFIX) and params[target.id][i:i + 1] != [arg.id]:
                out.append(f"{ast.unparse(call)[:100]} passes {arg.id} where {target.id} takes no such parameter")
    return out
