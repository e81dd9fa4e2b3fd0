"""What analyze() reads out of pooling: every spelling (module, F., torch.), the suite's pooling problems (one Op
each), what it must refuse, by name, and steps after a pooling."""

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


def window(pool, kernel, stride, padding=(0, 0), dilation=(1, 1), ceil_mode=False, count_include_pad=None, dims=2):
    return {"pool": pool, "dims": dims, "kernel": list(kernel), "stride": list(stride), "padding": list(padding),
            "dilation": list(dilation), "ceil_mode": ceil_mode,
            "count_include_pad": pool == "avg" if count_include_pad is None else count_include_pad,
            "output_size": None}


def adaptive(output_size, dims=2):
    return {"pool": "adaptive_avg", "dims": dims, "kernel": None, "stride": None, "padding": None,
            "dilation": None, "ceil_mode": False, "count_include_pad": False, "output_size": list(output_size)}


SUITE = {
    "maxpool2d": ("pool2d", window("max", (3, 3), (2, 2), (1, 1))),
    "avgpool2d": ("pool2d", window("avg", (3, 3), (2, 2), (1, 1))),
    "adaptive_avgpool2d": ("pool2d", adaptive((7, 7))),
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


POOLS = [  # (forward, __init__ body, detail)
    ("return self.pool(x)", "self.pool = nn.MaxPool2d((2, 3), stride=(1, 2), padding=(1, 0), dilation=2, "
     "ceil_mode=True)", window("max", (2, 3), (1, 2), (1, 0), (2, 2), ceil_mode=True)),
    ("return F.max_pool2d(x, 3, 2, 1)", "", window("max", (3, 3), (2, 2), (1, 1))),
    ("return F.max_pool2d(x, kernel_size=(2, 4), padding=(1, 2))", "", window("max", (2, 4), (2, 4), (1, 2))),
    ("return torch.max_pool2d(x, 2)", "", window("max", (2, 2), (2, 2))),
    ("return F.avg_pool2d(x, (3, 2), stride=1, padding=1, ceil_mode=True, count_include_pad=False)", "",
     window("avg", (3, 2), (1, 1), (1, 1), ceil_mode=True, count_include_pad=False)),
    ("return self.pool(x)", "self.pool = nn.AvgPool2d(3)", window("avg", (3, 3), (3, 3))),
    ("return F.adaptive_avg_pool2d(x, (None, 3))", "", adaptive((None, 3))),
    ("return self.pool(x)", "self.pool = nn.AdaptiveAvgPool2d(5)", adaptive((5, 5))),
    ("return self.pool(x)", "self.pool = nn.MaxPool1d(3, 2, 1, dilation=2)",
     window("max", (1, 3), (1, 2), (0, 1), (1, 2), dims=1)),
    ("return F.avg_pool1d(x, 4, ceil_mode=True)", "", window("avg", (1, 4), (1, 4), ceil_mode=True, dims=1)),
    ("return self.pool(x)", "self.pool = nn.AvgPool1d(3, 1, 1, count_include_pad=False)",
     window("avg", (1, 3), (1, 1), (0, 1), count_include_pad=False, dims=1)),
    ("return F.adaptive_avg_pool1d(x, 2)", "", adaptive((1, 2), dims=1)),
]


@pytest.mark.parametrize("forward, init, detail", POOLS, ids=[f"{f}|{i}" for f, i, _ in POOLS])
def test_pooling_spellings(tmp_path, forward, init, detail):
    assert one_op(tmp_path, forward, init) == ("pool2d", detail)


@pytest.mark.parametrize("forward, init, missing", [
    ("return F.max_pool2d(x, 2, return_indices=True)[0]", "", "max_pool2d with return_indices"),
    ("return self.pool(x)[0]", "self.pool = nn.MaxPool2d(2, return_indices=True)", "max_pool2d with return_indices"),
    ("return self.pool(x)", "self.pool = nn.AvgPool2d(3, divisor_override=2)", "avg_pool2d with divisor_override"),
    ("return F.avg_pool2d(x, 2, divisor_override=3)", "", "avg_pool2d with divisor_override"),
    ("return self.pool(x)", "self.pool = nn.LPPool2d(2, 3)", "lppool2d"),
    ("return self.pool(x)", "self.pool = nn.AdaptiveMaxPool2d(3)", "adaptivemaxpool2d"),
    ("return F.max_pool2d(x, padding='same', kernel_size=3)", "", "max_pool2d"),
])
def test_pooling_refusals(tmp_path, forward, init, missing):
    assert missing in refused(tmp_path, forward, init)


def test_steps_after_a_pooling_are_an_op_of_their_own(tmp_path):
    analysis = analyze(write(tmp_path, "return torch.relu(self.pool(x))", "self.pool = nn.MaxPool2d(2)"))
    assert [op.kind for op in analysis.ops] == ["pool2d", "elementwise"] and analysis.single is None
