"""syntax.py: parsing under one lock (CPython 3.11's ast is not thread-safe), same answers as ast."""

from __future__ import annotations

import ast
import threading

import pytest

from kernelcraft import syntax


def test_parse_literal_eval_and_compile_give_what_ast_gives():
    source = "x = (1, 2)\ndef f(a):\n    return a + x[0]\n"
    assert ast.dump(syntax.parse(source)) == ast.dump(ast.parse(source))
    assert syntax.literal_eval(" (128, 4096) ") == (128, 4096)
    namespace: dict = {}
    exec(syntax.compile_tree(syntax.parse(source, "m.py"), "m.py"), namespace)
    assert namespace["f"](1) == 2
    with pytest.raises(SyntaxError):
        syntax.parse("def f(:")
    with pytest.raises(ValueError):
        syntax.literal_eval("os.system('x')")


def test_many_threads_parse_at_once():
    source = "\n".join(f"def f{i}(a):\n    return [{{'k': (a, {i})}} for _ in range(3)]" for i in range(300))
    trees, errors = [], []

    def work():
        try:
            for _ in range(10):
                trees.append(len(syntax.parse(source).body))
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and trees == [300] * 60
