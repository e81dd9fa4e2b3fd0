"""What analyze() reads out of 3-D pooling: every spelling (nn modules, F., torch.) as one pool3d op, the suite's
problem, KernelBench's 3-D pooling problems, and what it must refuse, by name."""

from __future__ import annotations

import pytest

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from tests.helpers import KERNELBENCH
from tests.propose.builtin.test_analyze import write


def one_op(tmp_path, forward: str, init: str = ""):
    analysis = analyze(write(tmp_path, forward, init, inputs="[torch.randn(2, 3, 6, 7, 8)]"))
    assert analysis.single is not None, analysis
    return analysis.single.kind, analysis.single.detail


def refused(tmp_path, forward: str, init: str = "") -> list[str]:
    analysis = analyze(write(tmp_path, forward, init, inputs="[torch.randn(2, 3, 6, 7, 8)]"))
    assert analysis.single is None and analysis.error is None, analysis
    return analysis.unsupported


def window(pool, kernel, stride, padding=(0, 0, 0), dilation=(1, 1, 1), ceil_mode=False, count_include_pad=None):
    return {"pool": pool, "kernel": list(kernel), "stride": list(stride), "padding": list(padding),
            "dilation": list(dilation), "ceil_mode": ceil_mode,
            "count_include_pad": pool == "avg" if count_include_pad is None else count_include_pad,
            "output_size": None}


def adaptive(output_size, pool="adaptive_avg"):
    return {"pool": pool, "kernel": None, "stride": None, "padding": None, "dilation": None, "ceil_mode": False,
            "count_include_pad": False, "output_size": list(output_size)}


@pytest.mark.parametrize("forward, init, detail", [
    ("return self.pool(x)", "self.pool = nn.MaxPool3d(3, 2, 1)", window("max", (3, 3, 3), (2, 2, 2), (1, 1, 1))),
    ("return self.pool(x)", "self.pool = nn.MaxPool3d((2, 3, 1), stride=(1, 2, 1), padding=(1, 0, 0), dilation=2, "
                            "ceil_mode=True)",
     window("max", (2, 3, 1), (1, 2, 1), (1, 0, 0), (2, 2, 2), ceil_mode=True)),
    ("return F.max_pool3d(x, 3, 2, 1)", "", window("max", (3, 3, 3), (2, 2, 2), (1, 1, 1))),
    ("return F.max_pool3d(x, kernel_size=(2, 4, 2), padding=(1, 2, 0), dilation=(1, 1, 2))", "",
     window("max", (2, 4, 2), (2, 4, 2), (1, 2, 0), (1, 1, 2))),
    ("return torch.max_pool3d(x, 2)", "", window("max", (2, 2, 2), (2, 2, 2))),
    ("return torch.max_pool3d(x, 3, [], 1, 1, True)", "", window("max", (3, 3, 3), (3, 3, 3), (1, 1, 1),
                                                               ceil_mode=True)),
    ("return self.pool(x)", "self.pool = nn.AvgPool3d(3)", window("avg", (3, 3, 3), (3, 3, 3))),
    ("return self.pool(x)", "self.pool = nn.AvgPool3d((3, 2, 3), (2, 1, 1), 1, ceil_mode=True, "
                            "count_include_pad=False)",
     window("avg", (3, 2, 3), (2, 1, 1), (1, 1, 1), ceil_mode=True, count_include_pad=False)),
    ("return F.avg_pool3d(x, 2, stride=1, padding=1, count_include_pad=False)", "",
     window("avg", (2, 2, 2), (1, 1, 1), (1, 1, 1), count_include_pad=False)),
    ("return self.pool(x)", "self.pool = nn.AdaptiveAvgPool3d((1, 1, 1))", adaptive((1, 1, 1))),
    ("return self.pool(x)", "self.pool = nn.AdaptiveAvgPool3d(4)", adaptive((4, 4, 4))),
    ("return F.adaptive_avg_pool3d(x, (None, 3, 2))", "", adaptive((None, 3, 2))),
    ("return F.adaptive_avg_pool3d(x, output_size=1)", "", adaptive((1, 1, 1))),
    ("return self.pool(x)", "self.pool = nn.AdaptiveMaxPool3d((2, 3, 4))", adaptive((2, 3, 4), "adaptive_max")),
    ("return F.adaptive_max_pool3d(x, 1)", "", adaptive((1, 1, 1), "adaptive_max")),
])
def test_every_spelling_is_one_pool3d_op(tmp_path, forward, init, detail):
    assert one_op(tmp_path, forward, init) == ("pool3d", detail)


@pytest.mark.parametrize("forward, init, missing", [
    ("return F.max_pool3d(x, 2, return_indices=True)[0]", "", "max_pool3d with return_indices"),
    ("return self.pool(x)[0]", "self.pool = nn.MaxPool3d(2, return_indices=True)", "max_pool3d with return_indices"),
    ("return F.max_pool3d_with_indices(x, 2)[0]", "", "max_pool3d with return_indices"),
    ("return self.pool(x)[0]", "self.pool = nn.AdaptiveMaxPool3d(2, return_indices=True)",
     "adaptive_max_pool3d with return_indices"),
    ("return F.adaptive_max_pool3d(x, 2, return_indices=True)[0]", "", "adaptive_max_pool3d with return_indices"),
    ("return self.pool(x)", "self.pool = nn.AvgPool3d(3, divisor_override=2)", "avg_pool3d with divisor_override"),
    ("return F.avg_pool3d(x, 2, divisor_override=3)", "", "avg_pool3d with divisor_override"),
    ("return F.max_pool3d(x, (2, 2))", "", "max_pool3d"),  # two sizes for three dims
    ("return F.avg_pool3d(x, x.shape[2])", "", "avg_pool3d"),  # a size read from the input
    ("return F.adaptive_avg_pool3d(x, (2, 0, 2))", "", "adaptive_avg_pool3d"),
    ("return self.pool(x)", "self.pool = nn.LPPool3d(2, 3)", "lppool3d"),
])
def test_refusals_say_what(tmp_path, forward, init, missing):
    assert missing in refused(tmp_path, forward, init)


def test_a_pool_reads_the_chain_before_it(tmp_path):
    analysis = analyze(write(tmp_path, "return torch.relu(self.pool(x * 2.0))", "self.pool = nn.MaxPool3d(2)",
                             inputs="[torch.randn(2, 3, 6, 7, 8)]"))
    assert [(op.kind, op.src) for op in analysis.ops] == [("elementwise", "x"), ("pool3d", 0), ("elementwise", 1)]


def test_the_suite_problem_is_one_pool3d_op():
    analysis = analyze(load_problem("level1/maxpool3d"))
    assert analysis.single is not None and analysis.n_inputs == 1, analysis
    assert analysis.single.detail == window("max", (3, 3, 3), (2, 2, 2), (1, 1, 1), (2, 2, 2))


KERNELBENCH_POOLS = {  # upstream problem: the kinds of its chain (or its single op)
    "level1/43_Max_Pooling_3D": ["pool3d"],
    "level1/46_Average_Pooling_3D": ["pool3d"],
    "level2/6_Conv3d_Softmax_MaxPool_MaxPool": ["conv3d", "softmax", "pool3d", "pool3d"],
    "level2/8_Conv3d_Divide_Max_GlobalAvgPool_BiasAdd_Sum": ["conv3d", "pool3d", "pool3d", "elementwise", "reduce"],
    "level2/43_Conv3d_Max_LogSumExp_ReLU": ["conv3d", "pool3d", "reduce", "elementwise"],
}


@pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(), reason="no KernelBench copy")
@pytest.mark.parametrize("name", sorted(KERNELBENCH_POOLS))
def test_kernelbench_3d_pooling_problems_are_read(name):
    analysis = analyze(load_problem(KERNELBENCH / f"{name}.py"))
    assert not analysis.unsupported and analysis.error is None, analysis
    assert [op.kind for op in analysis.ops] == KERNELBENCH_POOLS[name]
