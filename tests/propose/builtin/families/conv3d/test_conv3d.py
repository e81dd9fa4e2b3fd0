"""The implicit-GEMM conv3d family: moves against nn.Conv3d / F.conv3d on odd volumes and hyper-parameters
(stride, padding incl. "same"/"valid", dilation, groups, depthwise, no bias, unbatched input), with and without an
epilogue; and the suite's conv3d problems end to end on their small sizes. On a GPU the reference runs with
cuDNN's TF32 off, as under the strict policy."""

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.propose.base import CATEGORIES
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from tests.propose.builtin.kernel_check import moves, needs_relaxed
from tests.propose.builtin.kernel_check import check, check_small_problem, reference, move_tolerance as tolerance

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

INIT = "self, cin, cout, k, s=1, p=0, d=1, g=1, b=True"
CONV = "self.conv = nn.Conv3d(cin, cout, k, stride=s, padding=p, dilation=d, groups=g, bias=b)"
# (init args, input shape)
CASES = [((3, 5, 3), (2, 3, 5, 7, 6)),  # odd sizes, no padding
         ((4, 6, (3, 2, 1), (2, 1, 2), (1, 0, 1), (1, 2, 1), 2, False), (1, 4, 6, 7, 5)),  # groups, dilation, no bias
         ((2, 3, 2, 2, 1), (2, 5, 4, 3)),  # unbatched (C, D, H, W), even kernel, strided, padded
         ((4, 4, 3, 1, 1, 1, 4), (1, 4, 3, 5, 4)),  # depthwise: a grouped GEMM of one out-channel per group
         ((2, 3, 2, 1, "valid"), (1, 2, 4, 3, 5)),  # "valid" padding
         ((3, 7, 3, 1, "same", 2), (1, 3, 5, 6, 7)),  # "same" padding, dilated
         ((2, 3, 1), (1, 2, 1, 1, 1))]  # 1x1x1 kernel on one voxel


def conv3d_op(steps=()) -> Op:
    return Op("conv3d", {"stride": [1, 1, 1], "padding": [0, 0, 0], "dilation": [1, 1, 1], "groups": 1,
                         "module": "conv", "groups_attr": None, "weight": "conv.weight", "bias": "conv.bias",
                         "steps": [list(s) for s in steps]})


def test_moves_are_distinct_and_tf32_is_marked():
    ms = moves(conv3d_op())
    assert len({m.text for m in ms}) == len(ms) >= 5
    assert all(m.category in CATEGORIES for m in ms)
    assert {m.params.precision for m in ms} == {"ieee", "tf32x3", "tf32"}
    assert all(m.params.precision == "tf32" for m in ms if needs_relaxed(m)) and not needs_relaxed(ms[0])
    strict = BuiltinProposer("cpu").moves(conv3d_op(), "triton")
    assert strict and not any(m.params.precision == "tf32" for m in strict)


@pytest.mark.parametrize("params", [m.params for m in moves(conv3d_op())],
                         ids=lambda p: "{precision}-{BLOCK_M}x{BLOCK_K}".format(**p.to_json()))
def test_conv3d_moves(params, tmp_path):
    check(conv3d_op(), reference("self.conv(x)", INIT, CONV), params, CASES, tmp_path, **tolerance(params))


def test_epilogue_and_functional_values(tmp_path):
    params = moves(conv3d_op())[1].params
    check(conv3d_op([["relu"], ["mul", 0.5]]), reference("torch.relu(self.conv(x)) * 0.5", INIT, CONV), params,
          CASES[:3], tmp_path, **tolerance(params))
    op = Op("conv3d", {"stride": [2, 1, 1], "padding": [1, 0, 2], "dilation": [1, 2, 1], "groups": 2, "module": None,
                       "groups_attr": "g", "weight": "w", "bias": None, "steps": [], "pool": None})
    ref = reference("F.conv3d(x, self.w, None, (2, 1, 1), (1, 0, 2), (1, 2, 1), self.g)", "self",
                    "self.g = 2\nself.w = nn.Parameter(torch.randn(6, 2, 3, 2, 3))")
    check(op, ref, params, [((), (2, 4, 7, 6, 5)), ((), (1, 4, 3, 3, 1))], tmp_path, **tolerance(params))


def test_half_inputs(tmp_path):
    check(conv3d_op(), reference("self.conv(x)", INIT, CONV), moves(conv3d_op())[1].params, CASES[:2], tmp_path,
          rtol=1e-2, atol=1e-2, dtype=torch.float16)


def test_suite_conv3d_is_covered_and_matches_on_its_small_sizes(tmp_path):
    problem = load_problem("level1/conv3d")
    engineer = BuiltinProposer("cpu")
    op = engineer.coverage(problem, "triton").single
    assert op.kind == "conv3d"
    for move in engineer.moves(op, "triton")[:2]:  # 3xTF32 and exact fp32
        check_small_problem(op, problem, move.params, tmp_path)


def test_conv3d_relu_mean_is_a_conv3d_with_a_relu_epilogue_then_the_mean(tmp_path):
    """level2/conv3d_relu_mean: conv3d + relu as one op, the mean over depth left as a reduce op of its own."""
    problem = load_problem("level2/conv3d_relu_mean")
    conv, mean = analyze(problem).ops
    assert conv.kind == "conv3d" and conv.detail["steps"] == [["relu"]]
    assert (mean.kind, mean.detail["op"], mean.detail["dim"]) == ("reduce", "mean", 2)
    got = check_small_problem(conv, problem, moves(conv)[1].params, tmp_path,  # ModelNew: the conv and relu only
                              want=lambda model, x: torch.relu(model.conv(x)))
    assert got.dim() == 5
