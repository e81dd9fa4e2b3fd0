"""A problem: a KernelBench-format PyTorch reference (`Model`, `get_inputs`, `get_init_inputs`)."""

from __future__ import annotations

import ast
import difflib
import hashlib
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kernelcraft import syntax
from kernelcraft.errors import KernelcraftError, ProblemError

SUITE_ROOT = Path(__file__).parent
MAX_SOURCE_BYTES = 1_000_000


@dataclass
class Problem:
    name: str  # "level1/softmax" for the suite and directories, the file stem otherwise
    path: Path
    source: str = field(repr=False)

    @property
    def level(self) -> int | None:
        m = re.match(r"level(\d+)/", self.name)
        return int(m.group(1)) if m else None

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def load(self, small: bool = False, sizes=None) -> types.ModuleType:
        """Execute the problem file in a fresh module.

        `sizes` (a problems.sizes.Sizes, or a dict of module-level constants) sets those constants as the
        file runs; `small` asks for the problem's small sizes: its SMALL_SIZES, else sizes derived from its cost.
        """
        if small and sizes is None:
            from kernelcraft.problems.sizes import resolve_sizes  # sizes.py loads problems itself

            sizes = resolve_sizes(self, "small", "cpu")
        constants = dict(getattr(sizes, "constants", sizes) or {})
        module = types.ModuleType(f"kernelcraft_problem_{self.sha}")
        module.__file__ = str(self.path)
        exec_problem(self.source, str(self.path), module, constants)
        missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, n)]
        if missing:
            raise ProblemError(f"{self.path}: not a KernelBench problem, it has no {', '.join(missing)}")
        return module


def exec_problem(source: str, filename: str, module: types.ModuleType, constants: Mapping) -> None:
    """Run a problem's source in `module` with some module-level constants replaced.

    Each constant is set again right after every top-level statement that binds it (`dim = 4096`,
    `depth, height, width = 16, 32, 32`, `height = width = 128`), not once after the file ran, so a
    constant computed from it (`bias_shape = (out_channels, 1, 1)`, `groups = in_channels`) follows it.
    A name no top-level statement binds is set before the file runs and again after it.
    """
    tree = syntax.parse(source, filename)
    body = []
    for node in tree.body:
        body.append(node)
        for name in syntax.bound_names(node):
            if name in constants:
                value = syntax.parse(repr(constants[name]), mode="eval").body
                body.append(ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], value), node))
    tree.body = body
    ast.fix_missing_locations(tree)
    module.__dict__.update(constants)
    try:
        exec(syntax.compile_tree(tree, filename), module.__dict__)
    except Exception as exc:
        raise ProblemError(f"{filename}: importing the problem raised {type(exc).__name__}: {exc}") from None
    module.__dict__.update(constants)


def read_source(path: Path, what: str) -> str:
    """A Python source file's text, or a one-line error for a missing, binary or huge file."""
    if not path.exists():
        raise ProblemError(f"{what} {path} does not exist")
    if path.is_dir():
        raise ProblemError(f"{what} {path} is a directory, not a file")
    size = path.stat().st_size
    if size > MAX_SOURCE_BYTES:
        raise ProblemError(f"{what} {path} is {size} bytes; source files are limited to {MAX_SOURCE_BYTES}")
    data = path.read_bytes()
    if b"\0" in data:
        raise ProblemError(f"{what} {path} is a binary file, not Python source")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProblemError(f"{what} {path} is not UTF-8 text") from None
    try:
        compile(text, str(path), "exec")
    except SyntaxError as exc:
        raise ProblemError(f"{what} {path}:{exc.lineno}: syntax error: {exc.msg}") from None
    return text


def suite_names() -> list[str]:
    return sorted(f"{p.parent.name}/{p.stem}" for p in SUITE_ROOT.glob("level*/*.py"))


def load_problem(spec: str | Path) -> Problem:
    """A problem from a file path or a suite name such as `level1/softmax`."""
    path = Path(spec)
    if path.exists() or str(spec).endswith(".py"):
        return Problem(path.stem, path, read_source(path, "problem"))
    suite_path = SUITE_ROOT / f"{spec}.py"
    if re.fullmatch(r"level\d+/\w+", str(spec)) and suite_path.exists():
        return Problem(str(spec), suite_path, read_source(suite_path, "problem"))
    names = suite_names()
    close = [n for n in names if str(spec).split("/")[-1] in n]  # the name's last part inside a suite name
    close += [n for n in difflib.get_close_matches(str(spec), names, n=4, cutoff=0.5) if n not in close]  # misspelt
    hint = f"; did you mean {', '.join(close[:4])}?" if close else "; `kernelcraft problems list` shows the suite"
    raise ProblemError(f"no problem file or suite problem named {spec!r}{hint}")


def numbered_order(rel: Path) -> tuple:
    """A problem file's place in its directory: the numbers in its path's parts compared as numbers (2_… before 10_…,
    100_… last; level2/ before level10/), the rest as text."""
    return tuple(tuple(int(t) if i % 2 else t for i, t in enumerate(re.split(r"(\d+)", part))) for part in rel.parts)


def load_problem_dir(root: str | Path) -> list[Problem]:
    """Every problem in a KernelBench-style directory (`level1/…py`, or a flat folder of files), in the order of their
    numbers (`numbered_order`)."""
    root = Path(root)
    if not root.is_dir():
        raise ProblemError(f"{root} is not a directory")
    problems = []
    for path in sorted(root.rglob("*.py"), key=lambda p: numbered_order(p.relative_to(root))):
        if path.name.startswith("_"):
            continue
        rel = path.relative_to(root).with_suffix("")
        problems.append(Problem("/".join(rel.parts[-2:]) if len(rel.parts) > 1 else rel.name,
                                path, read_source(path, "problem")))
    if not problems:
        raise ProblemError(f"{root} holds no problem files")
    return problems


def load_suite(level: int | None = None) -> list[Problem]:
    return [load_problem(n) for n in suite_names() if level is None or n.startswith(f"level{level}/")]
