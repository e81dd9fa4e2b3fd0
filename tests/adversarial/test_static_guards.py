"""The static guard (kernelcraft.verify.guards.static_findings) on its own: every cheat that must be
caught before it runs is caught with its named reason, and nothing honest is flagged: the honest
twins, the hand-written benchmark candidates and the bundled examples."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcraft.verify.guards import static_findings

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
REPO = HERE.parents[1]

# cheat fixture -> the reasons the static guard must give (each one must be among the findings)
STATIC_CHEATS = {
    "c07_side_stream_cheat": {"side_stream"},
    "c08_background_threads_cheat": {"static_concurrency"},
    "c10_timer_tampering_cheat": {"static_patching"},
    "c11_result_forgery_cheat": {"early_exit"},
    "c12_reading_expected_cheat": {"static_introspection"},
    "c13_seed_prediction_cheat": {"seed_prediction"},
    "c19_persisting_l2_cheat": {"persisting_l2"},
    "c21_harness_tampering_cheat": {"harness_tampering"},
}

HONEST = sorted(FIXTURES.glob("*_honest.py")) + \
    sorted(p for kind in ("cuda_nvrtc", "triton", "cuda_inline", "cpp")
           for p in (REPO / "benchmarks" / "candidates" / kind).glob("*.py")) + \
    sorted((REPO / "src" / "kernelcraft" / "examples").glob("*.py"))


def reasons(path: Path) -> set[str]:
    return {f.reason for f in static_findings(path.read_text())}


@pytest.mark.parametrize("stem", sorted(STATIC_CHEATS))
def test_static_cheat_is_caught(stem):
    found = static_findings((FIXTURES / f"{stem}.py").read_text())
    assert STATIC_CHEATS[stem] <= {f.reason for f in found}, found
    assert all(f.detail for f in found)


@pytest.mark.parametrize("path", [pytest.param(p, id=str(p.relative_to(REPO))) for p in HONEST])
def test_honest_source_has_no_findings(path):
    assert static_findings(path.read_text()) == []


def test_the_honest_corpus_is_not_empty():
    kinds = {p.parent.name for p in HONEST}
    assert {"fixtures", "cuda_nvrtc", "triton", "cuda_inline", "cpp", "examples"} <= kinds
    assert len([p for p in HONEST if p.parent == FIXTURES]) >= 21


def test_comments_and_docstrings_do_not_trip_rules():
    source = '''"""Mentions threading, gc.get_objects(), os._exit and torch.manual_seed in prose only."""
# import threading; time.perf_counter = lambda: 0
import torch
SOURCE = r"""
// cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &attr);  (a comment)
extern "C" __global__ void k(float* y) { y[0] = 0.0f; }
"""
'''
    assert static_findings(source) == []


def test_a_modules_eval_method_is_not_the_builtin():
    # apply's model files say `model = Net().eval()`; the reassembled model carries that text
    source = "import torch.nn as nn\nmodel = nn.Sequential(nn.ReLU()).eval()\nother = [model][0].eval()\n"
    assert static_findings(source) == []
    assert {f.reason for f in static_findings("x = eval('1 + 1')\n")} == {"static_introspection"}


@pytest.mark.parametrize("snippet, reason", [
    ("import time\nfrom time import perf_counter\ntime.perf_counter = perf_counter\n", "static_patching"),
    ("import torch\ntorch.cuda.synchronize = lambda *a: None\n", "static_patching"),
    ("import torch as T\nT.manual_seed(1234)\n", "seed_prediction"),
    ("import os as o\no._exit(0)\n", "early_exit"),
    ("from concurrent.futures import ThreadPoolExecutor\n", "static_concurrency"),
    ("import torch\ns = torch.cuda.Stream()\n", "side_stream"),
    ("import ctypes\n", "static_introspection"),
    ("from kernelcraft.verify import check\n", "static_introspection"),
    ("f = open('/tmp/x', mode='w')\n", "harness_tampering"),
    ('S = """' + "cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); launch<<<1, 1, 0, s>>>();" + '"""\n',
     "side_stream"),
])
def test_rule_variants(snippet, reason):
    assert reason in {f.reason for f in static_findings(snippet)}


USER_FILE = '''import sys
import os
import torch
import torch.nn as nn
torch.manual_seed(0)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        setattr(self, "act", nn.ReLU())

    def forward(self, x):
        return self.act(x)


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)


class ModelNew(Model):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
'''


def test_the_problems_own_statements_are_the_users_and_not_read():
    """apply's reassembled model carries the user's file (torch.manual_seed, sys, setattr): against that file as
    the problem, its unchanged statements are not read for rules; without it, the same text is refused."""
    candidate = USER_FILE + KERNEL
    assert {f.reason for f in static_findings(candidate)} >= {"static_introspection", "seed_prediction",
                                                              "static_patching"}
    assert static_findings(candidate, trusted=USER_FILE) == []


@pytest.mark.parametrize("added, reason", [
    ("torch.manual_seed(1)\n", "seed_prediction"),  # a statement of the file's, repeated by the candidate
    ("def peek():\n    return sys.modules\n", "static_introspection"),  # sys, which only the file imports
    ("import gc\n", "static_introspection"),
    ("class Other(nn.Module):\n    def __init__(self):\n        super().__init__()\n        setattr(self, 'a', 1)\n",
     "static_patching"),
])
def test_what_the_candidate_adds_beside_the_users_file_is_read(added, reason):
    candidate = USER_FILE + KERNEL + "\n" + added
    found = static_findings(candidate, trusted=USER_FILE)
    assert reason in {f.reason for f in found}, found


def test_a_changed_statement_of_the_users_file_is_the_candidates():
    changed = USER_FILE.replace("return self.act(x)", "setattr(torch, 'relu', None)\n        return self.act(x)")
    found = static_findings(changed + KERNEL, trusted=USER_FILE)
    assert "static_patching" in {f.reason for f in found}, found
