"""The main job with no model: the built-in engineer driven by `tree`, end to end on the CPU, on a
suite problem and on problems of other shapes and reduced dims written here."""

from __future__ import annotations

import pytest

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.search import RunConfig, start_run
from kernelcraft.spec import RunSpec
from tests.propose.builtin.kernel_check import moves

pytestmark = pytest.mark.slow

SOFTMAX_DIM0 = '''"""softmax over dim 0 of an odd-sized matrix."""
import torch
import torch.nn as nn

rows = 129
cols = 33


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=0)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
'''


def run(store, verifier, problem, tmp_path):
    engineer = BuiltinProposer("cpu")
    return start_run(store, problem, engineer, verifier,
                     RunSpec(RunConfig(strategy="tree", backend="triton", rounds=5, ideas=4, impls=1)),
                     out_dir=tmp_path / "out")


def test_builtin_tree_on_the_suite_softmax(store, verifier, tmp_path):
    problem = load_problem("level1/softmax")
    out = run(store, verifier, problem, tmp_path)
    n = len(moves(BuiltinProposer("cpu").coverage(problem, "triton").single))
    assert out.status == "done" and out.stop_reason == "proposer_exhausted"
    rows = store.candidates(out.run_id)
    assert len(rows) == n and all(r.status == "ok" for r in rows), [(r.key, r.status) for r in rows]
    assert out.best is not None and out.counters.cost == 0.0 and out.counters.input_tokens == 0
    assert "class ModelNew(Model)" in open(out.best_file).read()


def test_builtin_on_a_problem_written_here(store, verifier, tmp_path):
    path = tmp_path / "softmax_dim0.py"
    path.write_text(SOFTMAX_DIM0)
    out = run(store, verifier, load_problem(path), tmp_path)
    rows = store.candidates(out.run_id)
    assert rows and all(r.status == "ok" for r in rows), [(r.key, r.status) for r in rows]


def test_builtin_tree_on_a_level2_chain(store, verifier, tmp_path):
    """A chain of ops (chain.py: linear, then softmax) through the whole loop: the verifier judges it right."""
    problem = load_problem("level2/gemm_softmax")
    engineer = BuiltinProposer("cpu")
    out = start_run(store, problem, engineer, verifier,
                    RunSpec(RunConfig(strategy="tree", backend="triton", rounds=1, ideas=2, impls=1)),
                    out_dir=tmp_path / "out")
    rows = store.candidates(out.run_id)
    results = [store.result(r.id) for r in rows]
    assert out.status == "done" and rows and all(r.status == "ok" for r in rows), \
        [(r.key, r.status, d.reasons, d.message[-600:]) for r, d in zip(rows, results)]
    assert out.best is not None and "def kc_op0_" in open(out.best_file).read()
