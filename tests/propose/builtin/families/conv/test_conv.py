"""The implicit-GEMM convolution family: every move against nn.Conv2d on awkward shapes and hyper-parameters
(odd sizes, stride, dilation, groups, depthwise, no bias, unbatched input, "same"/"valid" padding), with and
without a fused epilogue. On a GPU the reference runs with cuDNN's TF32 off, as under the strict policy."""

import pytest
import torch

from kernelcraft.propose.base import CATEGORIES
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.kernel_check import ident, moves, needs_relaxed, render
from tests.propose.builtin.kernel_check import assert_no_torch_compute, check, reference, move_tolerance as tolerance

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

INIT = "self, cin, cout, k, s=1, p=0, d=1, g=1, b=True"
CONV = "self.conv = nn.Conv2d(cin, cout, k, stride=s, padding=p, dilation=d, groups=g, bias=b)"
# (init args, input shape)
CASES = [((3, 5, 3, 1, 1), (2, 3, 9, 7)),  # odd sizes, padding keeps the size
         ((4, 6, (3, 2), (2, 1), (0, 1), (1, 2), 2, False), (1, 4, 11, 10)),  # groups, dilation, no bias
         ((3, 17, 5, 2, 2), (3, 13, 13)),  # unbatched, odd out-channels
         ((6, 6, 3, 1, 1, 1, 6), (2, 6, 5, 8)),  # depthwise: the direct stencil kernel
         ((5, 5, (3, 2), 2, 1, 2, 5, False), (1, 5, 9, 11)),  # depthwise, strided, dilated, no bias
         ((4, 8, 3, 1, 1, 1, 4), (1, 4, 6, 6)),  # channel multiplier 2: grouped GEMM, not the stencil
         ((2, 3, 1), (1, 2, 1, 1))]  # 1x1 kernel on a 1x1 image


def conv_op(steps=()) -> Op:
    return Op("conv2d", {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1, "module": "conv",
                         "groups_attr": None, "weight": "conv.weight", "bias": "conv.bias", "steps": [list(s) for s in steps],
                         "pool": None})


def test_moves_are_distinct_and_tf32_is_marked():
    ms = moves(conv_op())
    assert len({m.text for m in ms}) == len(ms) >= 5
    assert all(m.category in CATEGORIES for m in ms)
    assert [m.params.precision for m in ms if needs_relaxed(m)] == ["tf32"] * sum(needs_relaxed(m) for m in ms)
    assert not needs_relaxed(ms[0])  # an exact-grade move comes first


@pytest.mark.parametrize("params", [m.params for m in moves(conv_op())], ids=lambda p: "{precision}-{BLOCK_M}x{BLOCK_K}".format(**p.to_json()))
def test_conv_moves(params, tmp_path):
    check(conv_op(), reference("self.conv(x)", INIT, CONV), params, CASES, tmp_path, **tolerance(params))


@pytest.mark.parametrize("forward, steps", [("torch.relu(self.conv(x))", [["relu"]]),
                                            ("torch.sigmoid(self.conv(x) * 2.0 - 1.0)", [["mul", 2.0], ["sub", 1.0],
                                                                                         ["sigmoid"]])])
def test_epilogue_steps(forward, steps, tmp_path):
    params = moves(conv_op())[1].params
    check(conv_op(steps), reference(forward, INIT, CONV), params, CASES[:3], tmp_path, **tolerance(params))


def test_same_and_valid_padding_and_functional_values(tmp_path):
    params = moves(conv_op())[0].params
    check(conv_op(), reference("self.conv(x)", "self, p", "self.conv = nn.Conv2d(3, 4, 3, padding=p, dilation=2)"),
          params, [(("same",), (1, 3, 9, 8)), (("valid",), (2, 3, 7, 7))], tmp_path, **tolerance(params))
    op = Op("conv2d", {"stride": [2, 1], "padding": [1, 0], "dilation": [1, 1], "groups": 2, "module": None,
                       "groups_attr": "g", "weight": "w", "bias": None, "steps": [], "pool": None})
    ref = reference("F.conv2d(x, self.w, None, (2, 1), (1, 0), 1, self.g)", "self",
                    "self.g = 2\nself.w = nn.Parameter(torch.randn(6, 2, 3, 3))")
    check(op, ref, params, [((), (2, 4, 8, 5)), ((), (1, 4, 3, 3))], tmp_path, **tolerance(params))


def test_half_inputs(tmp_path):
    params = moves(conv_op())[1].params
    check(conv_op(), reference("self.conv(x)", INIT, CONV), params, CASES[:2], tmp_path, rtol=1e-2, atol=1e-2,
          dtype=torch.float16)


POOLS = [{"pool": "max", "dims": 2, "kernel": [3, 3], "stride": [2, 2], "padding": [0, 0], "dilation": [1, 1],
          "ceil_mode": False, "count_include_pad": False, "output_size": None},
         {"pool": "avg", "dims": 2, "kernel": [2, 3], "stride": [1, 2], "padding": [1, 1], "dilation": [1, 1],
          "ceil_mode": True, "count_include_pad": True, "output_size": None},
         {"pool": "adaptive_avg", "dims": 2, "kernel": None, "stride": None, "padding": None, "dilation": None,
          "ceil_mode": False, "count_include_pad": False, "output_size": [1, 1]}]
POOL_MODULES = ["nn.MaxPool2d(3, 2)", "nn.AvgPool2d((2, 3), (1, 2), 1, ceil_mode=True)", "nn.AdaptiveAvgPool2d(1)"]


@pytest.mark.parametrize("pool, module", list(zip(POOLS, POOL_MODULES)), ids=["max", "avg", "adaptive"])
def test_conv_relu_then_pool(pool, module, tmp_path):
    op = conv_op([["relu"]])
    op.detail["pool"] = pool
    params = moves(op)[1].params
    check(op, reference("self.pool(torch.relu(self.conv(x)))", INIT, CONV + "\nself.pool = " + module), params,
          CASES[:3], tmp_path, **tolerance(params))


def test_generated_forward_calls_no_torch_compute():
    assert_no_torch_compute(render(conv_op(), reference("self.conv(x)", INIT, CONV), moves(conv_op())[0].params))


# ---------------------------------------------------------------- conv1d: the same kernels over one-row images

INIT1 = INIT
CONV1 = "self.conv = nn.Conv1d(cin, cout, k, stride=s, padding=p, dilation=d, groups=g, bias=b)"
CASES1 = [((3, 5, 3), (2, 3, 1000)),  # the suite's shape class: long rows, odd length
          ((4, 6, 5, 2, 2, 3, 2, False), (1, 4, 77)),  # stride, padding, dilation, groups, no bias
          ((3, 7, 5, 1, "same", 2), (2, 3, 19)),  # "same" padding, dilated
          ((6, 6, 3, 1, 1, 1, 6), (2, 6, 31)),  # depthwise: the stencil kernel over one row
          ((5, 3, 1), (5, 9)),  # unbatched (C, L), 1-wide kernel
          ((3, 4, 3, 2, "valid"), (2, 3, 11))]  # "valid" padding: one zero per spatial dim


def conv1d_op(steps=()) -> Op:
    return Op("conv1d", {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1, "module": "conv",
                         "groups_attr": None, "weight": "conv.weight", "bias": "conv.bias",
                         "steps": [list(s) for s in steps], "pool": None})


@pytest.mark.parametrize("params", [m.params for m in moves(conv1d_op())][::2],
                         ids=lambda p: "{precision}-{BLOCK_M}x{BLOCK_K}".format(**p.to_json()))
def test_conv1d_moves(params, tmp_path):
    check(conv1d_op(), reference("self.conv(x)", INIT1, CONV1), params, CASES1, tmp_path, **tolerance(params))


def test_conv1d_epilogue(tmp_path):
    check(conv1d_op([["relu"]]), reference("torch.relu(self.conv(x))", INIT1, CONV1), {}, CASES1[:2], tmp_path)


@pytest.mark.parametrize("params", [m.params.but(compiled_sizes=True) for m in moves(conv_op())
                                    if m.params.k_order in ("packed", "taps") and not m.params.relaxed][:3],
                         ids=ident)
def test_compiled_sizes_on_odd_shapes(params, tmp_path):
    """compiled_sizes: the implicit GEMMs' sizes, strides, padding and dilation are constexprs, one build per shape;
    every case its own build, each torch's result (depthwise keeps its stencil kernel)."""
    assert "compiled in as constants" in params.idea()
    check(conv_op(), reference("self.conv(x)", INIT, CONV), params, CASES, tmp_path, **tolerance(params))
