"""What analyze() reads out of arg-reductions and scans: every spelling (F., torch., method), the suite's problems
(one Op each), and what it must refuse, by name."""

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


SUITE = {
    "argmax": ("argreduce", {"op": "argmax", "dim": -1, "dim_attr": "dim", "keepdim": False}),
    "cumsum": ("scan", {"op": "cumsum", "dim": 1, "dim_attr": None}),
}


@pytest.mark.parametrize("name", sorted(SUITE))
def test_suite_problems_give_their_single_op(name):
    analysis = analyze(load_problem(f"level1/{name}"))
    assert analysis.single is not None, analysis
    assert (analysis.single.kind, analysis.single.detail) == SUITE[name]
    assert analysis.n_inputs == 1


@pytest.mark.parametrize("name", sorted(SUITE))
def test_the_engineer_covers_them_and_writes_a_kernel(name):
    problem = load_problem(f"level1/{name}")
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


@pytest.mark.parametrize("forward, init, detail", [
    ("return torch.cumsum(x, dim=1)", "", {"op": "cumsum", "dim": 1, "dim_attr": None}),
    ("return x.cumsum(-1)", "", {"op": "cumsum", "dim": -1, "dim_attr": None}),
    ("return torch.cumprod(x, 0)", "", {"op": "cumprod", "dim": 0, "dim_attr": None}),
    ("return x.cumprod(dim=self.dim)", "self.dim = 1", {"op": "cumprod", "dim": 1, "dim_attr": "dim"}),
])
def test_scan_spellings(tmp_path, forward, init, detail):
    assert one_op(tmp_path, forward, init) == ("scan", detail)


@pytest.mark.parametrize("forward, missing", [
    ("return torch.cumsum(x, 1, dtype=torch.float64)", "cumsum"),
    ("return x.cumsum(dim=0, dtype=torch.float16)", "cumsum"),
    ("return x.cumsum(dim=(0, 1))", "cumsum over several dims"),  # the method: fx records it unchecked
    ("return x.argmax((0, 1))", "argmax over several dims"),
    ("return x.cummax(1)[0]", "cummax"),
    ("return torch.logcumsumexp(x, 1)", "logcumsumexp"),
    ("return torch.max(x, 1)", "max with indices"),
])
def test_arg_and_scan_refusals(tmp_path, forward, missing):
    assert missing in refused(tmp_path, forward)


def test_chains_feed_them_and_follow_them_as_fusions(tmp_path):
    analysis = analyze(write(tmp_path, "return torch.cumsum(torch.relu(x) * 2.0, 1)"))
    assert [op.kind for op in analysis.ops] == ["elementwise", "scan"]
    assert analysis.ops[0].detail == {"steps": [["relu"], ["mul", 2.0]]} and analysis.ops[1].src == 0
    assert analysis.single is None and analysis.chain == analysis.ops
    analysis = analyze(write(tmp_path, "v, i = torch.max(x, 1)\nreturn v + i"))
    assert [op.kind for op in analysis.ops][:2] == ["reduce", "argreduce"] and analysis.chain is None
    assert "elementwise of argmax indices" in analysis.unsupported  # int64 + float: not followed
