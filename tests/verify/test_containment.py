"""The watch over a worker's process tree: every descendant found, by either way of listing them."""

from __future__ import annotations

import subprocess
import time

import psutil
import pytest

from kernelcraft.verify import containment


@pytest.fixture
def family():
    """A shell with two children, one of which has a child of its own: three descendants."""
    proc = subprocess.Popen(["sh", "-c", "sleep 60 & sh -c 'sleep 60 & wait' & wait"])
    deadline = time.monotonic() + 10
    while len(psutil.Process(proc.pid).children(recursive=True)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    yield proc
    for child in psutil.Process(proc.pid).children(recursive=True):
        child.kill()
    proc.kill()
    proc.wait()


def _expected(pid: int) -> set[int]:
    return {p.pid for p in psutil.Process(pid).children(recursive=True)}


@pytest.mark.parametrize("kernel_lists", [True, False], ids=["kernel-children-lists", "psutil"])
def test_descendants_are_the_whole_tree(family, kernel_lists, monkeypatch):
    if kernel_lists and not containment.kernel_children_lists():
        pytest.skip("this kernel does not list a task's children")
    monkeypatch.setattr(containment, "kernel_children_lists", lambda: kernel_lists)
    found = containment.descendants(family.pid)
    assert len(found) == 3 and set(found) == _expected(family.pid)
    assert [p.pid for p in containment.tree(family.pid)][0] == family.pid


def test_a_process_that_is_gone_has_no_tree():
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert containment.descendants(proc.pid) == [] and containment.tree(proc.pid) == []


def test_cpu_seconds_and_widened_affinity_are_read_from_outside():
    import os
    import subprocess
    import sys

    from kernelcraft.verify.containment import affinity_widened, cpu_seconds

    cores = sorted(os.sched_getaffinity(0))
    # it burns 0.3 s of CPU, however long a loaded machine takes to give it that (a wall-clock burn got 0.18 s)
    burn = "import time\nwhile time.process_time() < 0.3: pass\nimport sys; sys.stdin.read()"
    proc = subprocess.Popen([sys.executable, "-c", burn], stdin=subprocess.PIPE)
    try:
        os.sched_setaffinity(proc.pid, {cores[-1]})
        import time

        deadline = time.monotonic() + 30
        while cpu_seconds(proc.pid) < 0.25 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cpu_seconds(proc.pid) >= 0.25
        assert affinity_widened(proc.pid, {cores[-1]}) == []
        if len(cores) > 1:
            os.sched_setaffinity(proc.pid, set(cores))
            assert affinity_widened(proc.pid, {cores[-1]}) == [proc.pid]
    finally:
        proc.stdin.close()
        proc.wait()
