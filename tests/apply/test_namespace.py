"""Kernel files sharing one file: module-level names prefixed where they mean the module's binding, and nowhere
else (locals, parameters, class attributes, methods, strings); imports kept, and a clash said."""

from __future__ import annotations

import pytest

from kernelcraft.apply.namespace import NamespaceError, merged_imports, prefixed

SOURCE = '''
from __future__ import annotations
import math
import torch as T

BLOCK = 4
M = 3


def helper(M, n=BLOCK):  # M is the parameter here, not the module's
    total = n + M
    return [M for M in range(total)] + [BLOCK]


def uses_global():
    global BLOCK
    BLOCK = BLOCK + 1
    return BLOCK


class Thing:
    BLOCK = 100  # a class attribute: the class body's own name

    def helper(self):  # a method named as a module-level function
        return helper(M) + [self.BLOCK, BLOCK, "BLOCK"]


def make():
    return Thing().helper(), math.pi, T.zeros(1)
'''


def _run(text: str) -> dict:
    namespace: dict = {}
    exec(compile(text, "<test>", "exec"), namespace)
    return namespace


def test_prefixed_file_behaves_as_the_original():
    original = _run(SOURCE)
    p = prefixed(SOURCE, "r07_")
    assert p.future and "import math" in p.imports and "import torch as T" in p.imports
    assert set(p.names) == {"BLOCK", "M", "helper", "uses_global", "Thing", "make"}
    renamed = _run("\n".join(p.imports) + "\n" + p.body)
    assert renamed["r07_make"]() == original["make"]()
    assert renamed["r07_helper"](2) == original["helper"](2)
    assert renamed["r07_uses_global"]() == original["uses_global"]() and renamed["r07_BLOCK"] == 5
    assert hasattr(renamed["r07_Thing"], "helper") and renamed["r07_Thing"].BLOCK == 100
    assert "BLOCK" not in renamed and "make" not in renamed


def test_two_files_share_one():
    a, b = prefixed(SOURCE, "r00_"), prefixed(SOURCE.replace("BLOCK = 4", "BLOCK = 8"), "r01_")
    merged = _run("\n".join(merged_imports([a, b])) + "\n" + a.body + "\n" + b.body)
    assert merged["r00_helper"](0)[-1] == 4 and merged["r01_helper"](0)[-1] == 8


def test_imports_of_one_name_as_different_things_clash():
    a, b = prefixed("import numpy as np\nX = np\n", "a_"), prefixed("import torch as np\nX = np\n", "b_")
    with pytest.raises(NamespaceError, match="'np'"):
        merged_imports([a, b])
    same = merged_imports([a, prefixed("import numpy as np\n", "c_")])
    assert same == ["import numpy as np"]
