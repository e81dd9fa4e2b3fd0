"""The package's floors (DESIGN.md): a module imports only from floors below its own. Checked on the source
(every import statement, at module level or inside a function), so a lazy import cannot hide a borrowing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import kernelcraft

PACKAGE = Path(kernelcraft.__file__).parent
# the store's floor: what every floor above reads and writes
BOTTOM = ("kernelcraft.store", "kernelcraft.records", "kernelcraft.result", "kernelcraft.ranking", "kernelcraft.metrics",
          "kernelcraft.ledger", "kernelcraft.errors", "kernelcraft.syntax", "kernelcraft.target", "kernelcraft.spec")
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


def test_the_sessions_and_prepared_jobs_stand_right_under_the_api():
    """prepare.py (a job made ready) and session.py (its store, proposer and verifier) are the api's floor: only
    the api imports them, and they import no face."""
    below_api = ("kernelcraft.prepare", "kernelcraft.session")
    for package in ("kernelcraft.search", "kernelcraft.export", "kernelcraft.report", "kernelcraft.verify",
                    "kernelcraft.propose", "kernelcraft.problems", "kernelcraft.backends", "kernelcraft.apply",
                    "kernelcraft.cluster", "kernelcraft.rl", "kernelcraft.cli", "kernelcraft.mcp"):
        for module in modules_under(package):
            assert not borrowed(module, below_api), module
    for module in below_api:
        assert not borrowed(module, ("kernelcraft.api", "kernelcraft.cli", "kernelcraft.mcp")), module


# What a face (the CLI, the MCP server) may import: the api, the nouns it hands back and the errors it raises, the
# report's views of its data, and the face's own modules.
FACE_REACH = ("kernelcraft.api", "kernelcraft.errors", "kernelcraft.records", "kernelcraft.result",
              "kernelcraft.metrics", "kernelcraft.report", "kernelcraft.cli", "kernelcraft.mcp")


def test_the_faces_reach_the_library_through_the_api_only():
    for package in ("kernelcraft.cli", "kernelcraft.mcp"):
        for module in modules_under(package):
            beyond = {m for m in imports(module, runtime_only=True) if m not in ("kernelcraft", "kernelcraft.__version__")
                      and not any(m == f or m.startswith(f + ".") for f in FACE_REACH)}
            assert not beyond, (module, beyond)


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


# What the store gives back: read by attribute above it (kernelcraft/records.py), never by a string key.
STORE_READS = {"run", "runs", "candidate", "candidate_by_id", "candidates", "apply", "applies", "bench", "benches",
               "call", "calls", "idea", "ideas", "usage"}
STORE_NAMES = re.compile(r"(^|\.)(store|the_store|s|reader\(\))$")  # how the source names a Store


def keyed_row_reads(source: str) -> list[str]:
    """`row["key"]` and `row.get("key")` where `row` came from a Store read (in the same function: bound by an
    assignment, a for loop or a comprehension over one, or over a name bound so), or straight on the read
    (`store.run(x)["id"]`): each as "line: text". A name bound from a read anywhere in a function counts all
    through it, so a function that reuses the name for something else is read as reading a row: rename it."""

    def is_read(node) -> bool:
        while isinstance(node, ast.Subscript):  # rows[0]
            node = node.value
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in STORE_READS
                and bool(STORE_NAMES.search(ast.unparse(node.func.value))))

    def keyed(node):  # the expression a string key is read from, else None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return node.value
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            return node.func.value
        return None

    def own(scope):  # the nodes of a scope, not those of the functions defined in it (scopes of their own)
        stack = list(ast.iter_child_nodes(scope))
        while stack:
            node = stack.pop()
            yield node
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                stack.extend(ast.iter_child_nodes(node))

    def scan(scope, found: list) -> None:
        rows = set()
        def names(target) -> set[str]:  # `row`, or `(run,)`
            return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}

        def of_rows(node) -> bool:  # a Store read, or a name holding what one gave back
            return is_read(node) or (isinstance(node, ast.Name) and node.id in rows)

        for _ in range(2):  # twice: `rows = store.candidates(r)` before `for c in rows`, whatever the walk's order
            for node in own(scope):
                if isinstance(node, ast.Assign) and of_rows(node.value):
                    rows.update(n for t in node.targets for n in names(t))
                elif isinstance(node, ast.For) and of_rows(node.iter):
                    rows.update(names(node.target))
        for node in own(scope):  # a comprehension's names are its own
            if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
                inner = set()
                for g in node.generators:
                    if of_rows(g.iter) or (isinstance(g.iter, ast.Name) and g.iter.id in inner):
                        inner |= names(g.target)
                for sub in ast.walk(node):
                    on = keyed(sub)
                    if on is not None and isinstance(on, ast.Name) and on.id in inner:
                        found.append((sub.lineno, ast.unparse(sub)))
        for node in own(scope):
            on = keyed(node)
            if on is not None and ((isinstance(on, ast.Name) and on.id in rows) or is_read(on)):
                found.append((node.lineno, ast.unparse(node)))

    tree = ast.parse(source)
    found: list = []
    scan(tree, found)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scan(node, found)
    return [f"{line}: {text}" for line, text in sorted(set(found))]


def test_no_module_above_the_store_reads_a_stored_row_by_a_string_key():
    offenders = {}
    for package in ABOVE_THE_STORE:
        for module in [package] if not PACKAGE.joinpath(*package.split(".")[1:]).is_dir() else modules_under(package):
            path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
            if found := keyed_row_reads(path.read_text()):
                offenders[module] = found
    assert not offenders, offenders


def test_the_row_read_check_finds_what_it_looks_for():
    planted = ('def f(store, the_store, self, prepared):\n'
               '    row = store.run(run_id)\n    print(row["status"])\n    for c in the_store.candidates(x):\n'
               '        c.get("key")\n    best = self.store.candidate(r, k)["source"]\n    run = prepared.run(e)\n'
               '    ids = [r["id"] for r in store.runs(bench_id=b)]\n    return run["ok"], [r["x"] for r in ids]\n'
               'def g(row):\n    return row["status"]\n')
    assert keyed_row_reads(planted) == ["3: row['status']", "5: c.get('key')",
                                        "6: self.store.candidate(r, k)['source']", "8: r['id']"]
