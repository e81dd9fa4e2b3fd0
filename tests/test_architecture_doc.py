"""docs/architecture.md stays true: every module it names exists, every noun is defined where it says, and every
package of kernelcraft has its place on the floors table (a new package must be placed there)."""

from __future__ import annotations

import ast
import re

from tests.helpers import REPO
from tests.test_floors import BOTTOM, PACKAGE

DOC = (REPO / "docs" / "architecture.md").read_text()
PATHS = set(re.findall(r"`(kernelcraft/[\w/]+(?:\.py|/))`", DOC))


def _section(title: str) -> str:
    return DOC.split(f"## {title}")[1].split("\n## ")[0]


def test_every_module_the_page_names_exists():
    assert len(PATHS) > 40
    missing = [p for p in PATHS if not (PACKAGE.parent / p).exists()]
    assert not missing, missing


def test_every_noun_is_defined_where_the_page_says():
    rows = re.findall(r"^\| `(.+?)` \| (.+?) \|", _section("2. Nouns"), re.M)
    assert len(rows) >= 6
    for nouns, places in rows:
        names = re.findall(r"(\w+)", nouns.replace("`", ""))
        defined = set()
        for place in re.findall(r"`(kernelcraft/[\w/]+\.py)`", places):
            tree = ast.parse((PACKAGE.parent / place).read_text())
            defined |= {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        assert set(names) <= defined, (nouns, places)


def test_every_package_and_the_store_floor_have_their_row():
    floors = _section("1. Floors")
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()} - {"examples"}
    placed = {m.split("/")[1] for m in re.findall(r"`(kernelcraft/\w+)/`", floors)}
    assert packages <= placed, packages - placed
    for module in BOTTOM:
        assert f"`{module.replace('.', '/')}.py`" in floors, module
