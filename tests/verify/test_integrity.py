"""The harness's integrity check (verify/integrity.py), on a tree of its own, and what it costs on the real one."""

from __future__ import annotations

import os
import time

import pytest

from kernelcraft.verify.integrity import Integrity


@pytest.fixture
def tree(tmp_path):
    package = tmp_path / "site" / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "mod.py").write_text("X = 1\n")
    (package / "prompt.txt").write_text("say hello\n")
    (package / "sub" / "inner.py").write_text("Y = 2\n")
    installed = tmp_path / "site" / "torchish"
    installed.mkdir()
    (installed / "functional.py").write_text("def relu(x): return x\n")
    (installed / "lib.so").write_bytes(b"\0")
    return tmp_path / "site"


def watch(tree) -> Integrity:
    return Integrity([tree / "pkg"], [tree / "torchish"], [tree])


def test_nothing_changed_is_nothing_and_a_touch_with_the_same_bytes_too(tree):
    integrity = watch(tree)
    assert integrity.check() is None
    os.utime(tree / "pkg" / "mod.py", ns=(1, 1))  # stat changes, bytes do not: hashed, and let be
    (tree / "pkg" / "__pycache__").mkdir()  # the interpreter's own
    (tree / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"pyc")
    assert integrity.check() is None and integrity.checks == 2


@pytest.mark.parametrize("change, named", [
    (lambda t: (t / "pkg" / "sub" / "inner.py").write_text("Y = 3\n"), "pkg/sub/inner.py was rewritten"),
    (lambda t: (t / "pkg" / "prompt.txt").write_text("say goodbye\n"), "pkg/prompt.txt was rewritten"),
    (lambda t: (t / "pkg" / "mod.py").unlink(), "pkg/mod.py was removed"),
    (lambda t: (t / "pkg" / "sub" / "timing").mkdir(), "pkg/sub/: timing added"),  # a package shadowing a module
    (lambda t: (t / "torchish" / "functional.py").write_text("def relu(x): return x * 0\n"),
     "torchish/functional.py was rewritten"),
    (lambda t: (t / "evil.pth").write_text("import os\n"), "site/: evil.pth added"),
])
def test_a_change_is_named_and_kept(tree, change, named):
    integrity = watch(tree)
    change(tree)
    found = integrity.check()
    assert found is not None and found.startswith(named), found
    assert found.endswith("on disk since the verifier started")
    assert integrity.check() == found  # sticky, whatever happens next
    assert named in integrity.message()


def test_a_stat_only_file_rewritten_with_its_old_mtime_is_still_seen(tree):
    path = tree / "torchish" / "functional.py"
    integrity = watch(tree)
    before = path.stat()
    time.sleep(0.01)
    path.write_text("def relu(x): return x\n".replace("x\n", "y\n"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # the size and mtime put back; the ctime cannot be
    assert integrity.check() is not None


def test_the_harness_snapshot_and_a_check_are_cheap():
    """kernelcraft hashed, torch and Triton stat'ed: measured here (2 cores) 0.1-0.2 s to start, ~15 ms a check."""
    integrity = Integrity.of_harness()
    assert len(integrity.files) > 1000 and integrity.setup_s < 5
    start = time.perf_counter()
    integrity.check()  # (None unless the checkout is being edited meanwhile)
    assert time.perf_counter() - start < 1
