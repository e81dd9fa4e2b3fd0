"""What analyze() reads out of scans: every spelling (torch., method), the suite's problem (one Op), what it must
refuse, by name, and a chain feeding a scan. Reverse scans, flip(cumsum(flip(x))), are in test_reverse.py."""

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
    analysis = analyze(load_problem("level1/cumsum"))
    assert analysis.single is not None, analysis
    assert (analysis.single.kind, analysis.single.detail) == ("scan", {"op": "cumsum", "dim": 1, "dim_attr": None})
    assert analysis.n_inputs == 1


def test_the_engineer_covers_it_and_writes_a_kernel():
    problem = load_problem("level1/cumsum")
    parsed = parse_kernel(BuiltinProposer("cpu").ask(Request("implement", problem, "triton")).text)
    assert parsed.error is None and "class ModelNew(Model)" in parsed.source and "@triton.jit" in parsed.source


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
    ("return x.cummax(1)[0]", "cummax"),
    ("return torch.logcumsumexp(x, 1)", "logcumsumexp"),
])
def test_scan_refusals(tmp_path, forward, missing):
    assert missing in refused(tmp_path, forward)


def test_a_chain_feeds_a_scan(tmp_path):
    """Pointwise steps only the scan reads become its prologue (test_prologue.py); read by another op too, they stay
    an elementwise op the scan reads."""
    analysis = analyze(write(tmp_path, "return torch.cumsum(torch.relu(x) * 2.0, 1)"))
    assert analysis.single is not None and analysis.single.kind == "scan", analysis
    assert analysis.single.detail["pre"] == [["relu"], ["mul", 2.0]] and analysis.single.src == "x"
    analysis = analyze(write(tmp_path, "y = torch.relu(x) * 2.0\nreturn torch.cumsum(y, 1) + y"))
    assert [op.kind for op in analysis.ops][:2] == ["elementwise", "scan"], analysis
    assert analysis.ops[1].src == 0 and not analysis.ops[1].detail.get("pre")
