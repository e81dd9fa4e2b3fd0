"""The CLI's layout: a package of modules that each import alone (no cycles), its commands registered in one
place, and nothing else in kernelcraft importing it (the floors: cli → api → …)."""

from __future__ import annotations

import ast
import os
import pkgutil
import subprocess
import sys

import pytest

import kernelcraft.cli
from kernelcraft.cli.commands import COMMANDS
from tests.helpers import REPO

SRC = REPO / "src" / "kernelcraft"
CLI_MODULES = sorted(f"kernelcraft.cli.{m.name}" for m in pkgutil.iter_modules(kernelcraft.cli.__path__)
                     if m.name != "__main__")


@pytest.mark.parametrize("module", ["kernelcraft.cli", *CLI_MODULES])
def test_each_cli_module_imports_alone(module):
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert proc.returncode == 0, proc.stderr


def _imports(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def test_nothing_outside_the_cli_package_imports_it():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.is_relative_to(SRC / "cli"):
            continue
        for name in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if name == "kernelcraft.cli" or name.startswith("kernelcraft.cli."):
                if path.name == "__main__.py" and path.parent == SRC:  # `python -m kernelcraft` is the CLI's door
                    continue
                found.append(f"{path.relative_to(SRC)}: {name}")
    assert found == []


def test_the_old_flat_modules_are_gone():
    assert sorted(p.name for p in SRC.glob("cli*.py")) == []


def test_every_command_is_one_module_registered_once():
    names = [command.NAME for command in COMMANDS]
    assert len(names) == len(set(names))
    for command in COMMANDS:
        assert callable(command.add_parser) and callable(command.run), command.__name__
    with_parsers = {m for m in CLI_MODULES if hasattr(__import__(m, fromlist=["_"]), "add_parser")}
    assert with_parsers == {command.__name__ for command in COMMANDS}  # no command outside the registry


def test_the_parser_and_the_dispatch_come_from_the_registry():
    from kernelcraft.cli.app import build_parser

    text = build_parser().format_help()
    for command in COMMANDS:
        assert command.NAME in text
