"""What analyze() reads out of arg-reductions: every spelling (torch., method, and the indices of torch.max /
torch.min over a dim), the suite's problem (one Op), and what it must refuse, by name."""

from __future__ import annotations

import pytest

from kernelcraft.problems import load_problem
from kernelcraft.propose.base import Request
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.propose.parse import parse_kernel
from tests.propose.builtin.test_analyze import write


def one_op(tmp_path, forward: str, init: str = ""):
    analysis = analyze(write(tmp_path, forward, init))
    assert analysis.single is not None, analysis
    return analysis.single.kind, analysis.single.detail


def refused(tmp_path, forward: str, init: str = "") -> list[str]:
    analysis = analyze(write(tmp_path, forward, init))
    assert analysis.single is None and analysis.error is None, analysis
    return analysis.unsupported


def test_the_suite_problem_gives_its_single_op():
    analysis = analyze(load_problem("level1/argmax"))
    assert analysis.single is not None, analysis
    assert (analysis.single.kind, analysis.single.detail) == \
        ("argreduce", {"op": "argmax", "dim": -1, "dim_attr": "dim", "keepdim": False})
    assert analysis.n_inputs == 1


def test_the_engineer_covers_it_and_writes_a_kernel():
    problem = load_problem("level1/argmax")
    parsed = parse_kernel(BuiltinProposer("cpu").ask(Request("implement", problem, "triton")).text)
    assert parsed.error is None and "class ModelNew(Model)" in parsed.source and "@triton.jit" in parsed.source


@pytest.mark.parametrize("forward, init, detail", [
    ("return torch.argmax(x, dim=1)", "", {"op": "argmax", "dim": 1, "dim_attr": None, "keepdim": False}),
    ("return x.argmin(0, keepdim=True)", "", {"op": "argmin", "dim": 0, "dim_attr": None, "keepdim": True}),
    ("return torch.argmax(x)", "", {"op": "argmax", "dim": None, "dim_attr": None, "keepdim": False}),
    ("return torch.argmin(x, keepdim=True)", "", {"op": "argmin", "dim": None, "dim_attr": None, "keepdim": True}),
    ("return torch.max(x, 1)[1]", "", {"op": "argmax", "dim": 1, "dim_attr": None, "keepdim": False}),
    ("return torch.max(x, dim=1).indices", "", {"op": "argmax", "dim": 1, "dim_attr": None, "keepdim": False}),
    ("return x.min(dim=0, keepdim=True)[1]", "", {"op": "argmin", "dim": 0, "dim_attr": None, "keepdim": True}),
    ("return torch.argmax(x, self.dim)", "self.dim = -2", {"op": "argmax", "dim": -2, "dim_attr": "dim",
                                                           "keepdim": False}),
])
def test_argreduce_spellings(tmp_path, forward, init, detail):
    assert one_op(tmp_path, forward, init) == ("argreduce", detail)


@pytest.mark.parametrize("forward, missing", [
    ("return x.argmax((0, 1))", "argmax over several dims"),
    ("return torch.max(x, 1)", "max with indices"),
])
def test_argreduce_refusals(tmp_path, forward, missing):
    assert missing in refused(tmp_path, forward)


def test_values_and_indices_of_one_max_are_two_ops(tmp_path):
    analysis = analyze(write(tmp_path, "v, i = torch.max(x, 1)\nreturn v + i"))
    assert [op.kind for op in analysis.ops][:2] == ["reduce", "argreduce"] and analysis.chain is None
    assert "elementwise of argmax indices" in analysis.unsupported  # int64 + float: not followed
