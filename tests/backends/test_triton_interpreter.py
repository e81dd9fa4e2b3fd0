"""Triton's interpreter runs the built-in engineer's grid-stride loops on every Triton release we take.

Triton 3.6's interpreter converts a scalar with `int(array)`, which numpy 2 refuses for its 1-element arrays; later
releases squeeze first. The scripts below put 3.6's conversion back into whichever Triton is installed, so the
fix (`make_ready`) is tested on any release: without it the loop raises, with it the kernel copies its input.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import REPO

pytest.importorskip("triton")

SCRIPT = """
import sys
import torch, triton, triton.language as tl
from triton.runtime import interpreter

upstream = interpreter._patch_lang_tensor

def as_in_triton_3_6(tensor, scope):
    upstream(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data))

interpreter._patch_lang_tensor = as_in_triton_3_6
if sys.argv[1] == "fixed":
    from kernelcraft.backends.triton_interpreter import make_ready
    assert make_ready()

@triton.jit
def copy(x_ptr, y_ptr, n, n_tiles, BLOCK: tl.constexpr):
    for tile in range(tl.program_id(0).to(tl.int64), n_tiles, tl.num_programs(0)):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

x = torch.randn(1000)
y = torch.zeros_like(x)
copy[(3,)](x, y, 1000, 8, BLOCK=128)
print("copied" if torch.equal(x, y) else "wrong")
"""


def _run(mode: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], env=env, capture_output=True, text=True, timeout=300)


def _numpy_refuses_one_element_arrays() -> bool:
    try:
        int(np.array([3]))
    except TypeError:
        return True
    return False


def test_a_grid_stride_loop_runs_in_the_interpreter_once_it_is_made_ready():
    fixed = _run("fixed")
    assert fixed.returncode == 0 and fixed.stdout.strip() == "copied", fixed.stderr[-2000:]
    if _numpy_refuses_one_element_arrays():  # the failure the fix is for, as Triton 3.6 has it
        unfixed = _run("unfixed")
        assert unfixed.returncode != 0 and "0-dimensional" in unfixed.stderr, unfixed.stdout + unfixed.stderr[-2000:]


def test_it_is_left_alone_where_the_interpreter_is_off(monkeypatch):
    from kernelcraft.backends.triton_interpreter import make_ready

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert make_ready() is False
