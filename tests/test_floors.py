"""The package's floors (DESIGN.md): a module imports only from floors below its own. Checked on the source
(every import statement, at module level or inside a function), so a lazy import cannot hide a borrowing."""

from __future__ import annotations

import ast
from pathlib import Path

import kernelcraft

PACKAGE = Path(kernelcraft.__file__).parent
# the store's floor: what every floor above reads and writes
BOTTOM = ("kernelcraft.store", "kernelcraft.result", "kernelcraft.ranking", "kernelcraft.metrics",
          "kernelcraft.ledger", "kernelcraft.errors", "kernelcraft.syntax", "kernelcraft.target")
ABOVE_THE_STORE = ("kernelcraft.search", "kernelcraft.report", "kernelcraft.export", "kernelcraft.verify",
                   "kernelcraft.propose", "kernelcraft.api", "kernelcraft.cli", "kernelcraft.mcp", "kernelcraft.rl")


def imports(module: str, runtime_only: bool = False) -> set[str]:
    """The kernelcraft modules `module` imports, anywhere in its source; `runtime_only`: not those under
    `if TYPE_CHECKING:`, which never run."""
    path = PACKAGE.joinpath(*module.split(".")[1:])
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    tree = ast.parse(path.read_text())
    skipped = {id(n) for block in ast.walk(tree) if runtime_only and isinstance(block, ast.If)
               and getattr(block.test, "id", getattr(block.test, "attr", None)) == "TYPE_CHECKING"
               for n in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m.startswith("kernelcraft")}


def modules_under(package: str) -> list[str]:
    root = PACKAGE.joinpath(*package.split(".")[1:])
    return [package + "." + ".".join(p.relative_to(root).with_suffix("").parts) for p in root.rglob("*.py")
            if p.name != "__init__.py"]


def borrowed(module: str, floors: tuple[str, ...]) -> set[str]:
    return {m for m in imports(module) if any(m == f or m.startswith(f + ".") for f in floors)}


def test_the_store_floor_imports_nothing_above_it():
    for module in BOTTOM:
        assert not borrowed(module, ABOVE_THE_STORE), module


def test_proposers_do_not_reach_into_the_verifier():
    """A proposer reads what the verifier measured (a Target, a Result) from the floor both stand on."""
    for module in modules_under("kernelcraft.propose"):
        assert not borrowed(module, ("kernelcraft.verify",)), module


def test_search_and_export_do_not_borrow_the_reports_shapes():
    for package in ("kernelcraft.search", "kernelcraft.export"):
        for module in modules_under(package):
            assert not borrowed(module, ("kernelcraft.report",)), module


def test_nothing_below_the_faces_imports_them():
    faces = ("kernelcraft.api", "kernelcraft.cli", "kernelcraft.mcp")
    for package in ("kernelcraft.search", "kernelcraft.export", "kernelcraft.report", "kernelcraft.verify",
                    "kernelcraft.propose", "kernelcraft.problems", "kernelcraft.backends"):
        for module in modules_under(package):
            assert not borrowed(module, faces), module


def test_apply_sits_above_search_and_below_the_faces():
    for module in modules_under("kernelcraft.apply"):
        assert not borrowed(module, ("kernelcraft.api", "kernelcraft.cli", "kernelcraft.mcp")), module
    for package in ("kernelcraft.search", "kernelcraft.export", "kernelcraft.report", "kernelcraft.verify",
                    "kernelcraft.propose", "kernelcraft.problems", "kernelcraft.backends"):
        for module in modules_under(package):
            assert not borrowed(module, ("kernelcraft.apply",)), module


def test_the_cluster_sits_above_the_verifier_and_below_the_faces():
    for module in modules_under("kernelcraft.cluster"):
        assert not borrowed(module, ("kernelcraft.api", "kernelcraft.cli", "kernelcraft.mcp", "kernelcraft.apply",
                                     "kernelcraft.rl")), module
    for package in ("kernelcraft.search", "kernelcraft.export", "kernelcraft.report", "kernelcraft.verify",
                    "kernelcraft.propose", "kernelcraft.problems", "kernelcraft.backends", "kernelcraft.apply"):
        for module in modules_under(package):
            assert not borrowed(module, ("kernelcraft.cluster",)), module


def test_rl_sits_beside_apply_above_search_and_below_the_faces():
    """rl (the reward and the environment) stands on search, verify, propose, export and below, and judges on a
    cluster's verifier where one is configured; nothing below it, and nothing beside it (apply, cluster), imports
    it."""
    for module in modules_under("kernelcraft.rl"):
        assert not borrowed(module, ("kernelcraft.api", "kernelcraft.cli", "kernelcraft.mcp", "kernelcraft.apply")), module
    for package in ("kernelcraft.search", "kernelcraft.export", "kernelcraft.report", "kernelcraft.verify",
                    "kernelcraft.propose", "kernelcraft.problems", "kernelcraft.backends", "kernelcraft.apply"):
        for module in modules_under(package):
            assert not borrowed(module, ("kernelcraft.rl",)), module
    for module in BOTTOM:
        assert not borrowed(module, ("kernelcraft.rl",)), module


def test_no_two_modules_import_each_other_even_lazily():
    """A circle between modules (a lazy import inside a function counts: it only hides the circle) means one of
    them belongs elsewhere. A package's __init__ re-exporting its modules is no circle."""
    modules = set(modules_under("kernelcraft"))
    graph = {m: {i for i in imports(m, runtime_only=True) if i in modules and i != m} for m in modules}
    reach = {m: _reach(graph, m) for m in graph}
    circles = {tuple(sorted(m for m in reach[start] if start in reach[m])) for start in graph if start in reach[start]}
    assert not circles, sorted(circles)  # each circle once, its modules in order


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    stack, reached = list(graph[start]), set()
    while stack:
        m = stack.pop()
        if m not in reached:
            reached.add(m)
            stack.extend(graph[m])
    return reached
