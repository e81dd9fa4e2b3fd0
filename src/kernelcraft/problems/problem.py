"""A problem: a KernelBench-format PyTorch reference (`Model`, `get_inputs`, `get_init_inputs`)."""

from __future__ import annotations

import hashlib
import re
import types
from dataclasses import dataclass, field
from pathlib import Path

SUITE_ROOT = Path(__file__).parent
MAX_SOURCE_BYTES = 1_000_000


class ProblemError(ValueError):
    """A problem file that cannot be used: unreadable, not Python, or missing the KernelBench names."""


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

    def load(self, small: bool = False) -> types.ModuleType:
        """Execute the problem file in a fresh module; `small` applies its SMALL_SIZES, if any."""
        module = types.ModuleType(f"kernelcraft_problem_{self.sha}")
        module.__file__ = str(self.path)
        try:
            exec(compile(self.source, str(self.path), "exec"), module.__dict__)
        except Exception as exc:
            raise ProblemError(f"{self.path}: importing the problem raised "
                               f"{type(exc).__name__}: {exc}") from None
        missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, n)]
        if missing:
            raise ProblemError(f"{self.path}: not a KernelBench problem, it has no {', '.join(missing)}")
        if small:
            for key, value in (getattr(module, "SMALL_SIZES", None) or {}).items():
                setattr(module, key, value)
        return module


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
    close = [n for n in suite_names() if str(spec).split("/")[-1] in n]
    hint = f"; did you mean {', '.join(close[:4])}?" if close else "; `kernelcraft problems list` shows the suite"
    raise ProblemError(f"no problem file or suite problem named {spec!r}{hint}")


def load_problem_dir(root: str | Path) -> list[Problem]:
    """Every problem in a KernelBench-style directory (`level1/…py`, or a flat folder of files)."""
    root = Path(root)
    if not root.is_dir():
        raise ProblemError(f"{root} is not a directory")
    problems = []
    for path in sorted(root.rglob("*.py")):
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
