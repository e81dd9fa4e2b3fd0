"""The pool3d family: every move of max / avg / adaptive avg / adaptive max pooling over (D, H, W), rendered and run
against torch on small odd shapes (size-1 dims, unbatched inputs), with kernels 1 to 3, strides other than the
kernel, padding, dilation, ceil_mode, count_include_pad both ways, non-dividing and enlarging adaptive bins, global
pools, NaN inputs and fp16.

Without a GPU the kernels run in Triton's interpreter (conftest.py)."""

import itertools
import json

import pytest
import torch
import torch.nn as nn

from kernelcraft.problems import load_problem
from kernelcraft.propose.base import CATEGORIES
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.families.pool3d import Tiling
from kernelcraft.propose.builtin.families.pool3d.kernels import kc_pool3d_out
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import (DEVICE, check, check_small_problem, ident, load, moves, parts,
                                               reference, render)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def pool(kind, kernel, stride=None, padding=(0, 0, 0), dilation=(1, 1, 1), ceil_mode=False,
         count_include_pad=False) -> Op:
    return Op("pool3d", {"pool": kind, "kernel": list(kernel), "stride": list(stride or kernel),
                         "padding": list(padding), "dilation": list(dilation), "ceil_mode": ceil_mode,
                         "count_include_pad": count_include_pad, "output_size": None})


def adaptive(output_size, kind="adaptive_avg") -> Op:
    return Op("pool3d", {"pool": kind, "kernel": None, "stride": None, "padding": None, "dilation": None,
                         "ceil_mode": False, "count_include_pad": False, "output_size": list(output_size)})


SHAPES = [(2, 3, 5, 7, 9), (1, 2, 4, 6, 5), (3, 5, 6, 7)]  # the last unbatched: (C, D, H, W)

CASES = {  # name: (op, module expression, input shapes)
    "max_3s2p1": (pool("max", [3, 3, 3], [2, 2, 2], (1, 1, 1)), "nn.MaxPool3d(3, 2, 1)", SHAPES),
    "max_rect_dil_ceil": (pool("max", [2, 3, 2], [1, 2, 2], (1, 0, 1), (2, 1, 1), ceil_mode=True),
                          "nn.MaxPool3d((2, 3, 2), (1, 2, 2), (1, 0, 1), dilation=(2, 1, 1), ceil_mode=True)",
                          SHAPES),
    "max_dil3_pad1": (pool("max", [3, 3, 3], [2, 2, 2], (1, 1, 1), (3, 3, 3)),
                      "nn.MaxPool3d(3, 2, 1, dilation=3)", [(1, 2, 7, 8, 9), (2, 7, 7, 7)]),  # as 43_Max_Pooling_3D
    "max_1_stride": (pool("max", [1, 1, 1], [1, 2, 3]), "nn.MaxPool3d(1, (1, 2, 3))", SHAPES),
    "max_2_ceil": (pool("max", [2, 2, 2], ceil_mode=True), "nn.MaxPool3d(2, ceil_mode=True)",
                   [(2, 3, 5, 7, 9), (1, 1, 1, 2, 3), (3, 5, 6, 7)]),
    "avg_3s2p1": (pool("avg", [3, 3, 3], [2, 2, 2], (1, 1, 1), count_include_pad=True), "nn.AvgPool3d(3, 2, 1)",
                  SHAPES),
    "avg_no_pad_count": (pool("avg", [3, 2, 3], [2, 3, 1], (1, 1, 1), ceil_mode=True),
                         "nn.AvgPool3d((3, 2, 3), (2, 3, 1), 1, ceil_mode=True, count_include_pad=False)", SHAPES),
    "avg_ceil_pad_count": (pool("avg", [3, 3, 3], [2, 2, 2], (1, 1, 1), ceil_mode=True, count_include_pad=True),
                           "nn.AvgPool3d(3, 2, 1, ceil_mode=True)", SHAPES),
    "avg_2": (pool("avg", [2, 2, 2], count_include_pad=True), "nn.AvgPool3d(2)", SHAPES),
    "adaptive_odd": (adaptive([3, 4, 2]), "nn.AdaptiveAvgPool3d((3, 4, 2))",
                     [(2, 3, 7, 9, 5), (1, 2, 2, 3, 7), (3, 5, 6, 7)]),  # bins that do not divide, and D 2 -> 3
    "adaptive_none": (adaptive([None, 3, None]), "nn.AdaptiveAvgPool3d((None, 3, None))",
                      [(2, 3, 5, 7, 4), (1, 1, 1, 2, 3)]),
    "adaptive_max": (adaptive([2, 3, 4], "adaptive_max"), "nn.AdaptiveMaxPool3d((2, 3, 4))",
                     [(2, 3, 5, 7, 9), (3, 3, 2, 5)]),
    "global_avg": (adaptive([1, 1, 1]), "nn.AdaptiveAvgPool3d((1, 1, 1))",
                   [(2, 3, 5, 7, 9), (1, 1, 1, 1, 1), (5, 6, 7, 3)]),
    "global_max": (adaptive([1, 1, 1], "adaptive_max"), "nn.AdaptiveMaxPool3d(1)", [(2, 3, 5, 7, 9), (3, 4, 2, 5)]),
}


def _ref(module: str) -> str:
    return reference("self.pool(x)", "self", f"self.pool = {module}")


def _every_move():
    return [(c, i) for c in sorted(CASES) for i in range(len(moves(CASES[c][0])))]


# every move on every case: the tiling must not matter
@pytest.mark.parametrize("case, move", _every_move())
def test_every_move_matches_torch(case, move, tmp_path):
    op, module, shapes = CASES[case]
    check(op, _ref(module), moves(op)[move].params, [((), s) for s in shapes], tmp_path)


def test_moves_are_distinct_and_typed():
    for op in (CASES["max_3s2p1"][0], CASES["adaptive_odd"][0], CASES["global_avg"][0]):
        ms = moves(op)
        assert 4 <= len(ms) <= 6 and len({m.text for m in ms}) == len(ms)
        assert len({json.dumps(m.params.to_json(), sort_keys=True) for m in ms}) == len(ms)
        assert all(isinstance(m.params, Tiling) and m.category in CATEGORIES for m in ms)
        assert all(Tiling.from_json(m.params.to_json()) == m.params for m in ms)
    assert moves(CASES["adaptive_odd"][0])[0].params.BLOCK_Q > 1  # few outputs per plane: packed slices first
    assert {m.params.variant for m in moves(CASES["global_avg"][0])} == {"global"}
    assert {m.params.variant for m in moves(CASES["max_3s2p1"][0])} == {"tile", "flat"}


def test_a_global_pool_is_one_reduction_per_plane():
    op = CASES["global_avg"][0]
    _, sources, body = parts(op)
    assert "def kc_mean_reduce_kernel(" in sources[-1] and not any("for kd" in s for s in sources)
    assert "kc_plan(outer, R, inner, 0, 1024, 1024, 256, 1024, x.element_size())" in body


@pytest.mark.parametrize("case", ["global_avg", "global_max"])
@pytest.mark.parametrize("params", [{"variant": "tile", "BLOCK_Q": 4, "BLOCK_H": 2, "BLOCK_W": 2},
                                    {"variant": "flat", "BLOCK": 64}], ids=ident)
def test_a_global_pool_by_windows_is_right_too(case, params, tmp_path):
    op, module, shapes = CASES[case]
    check(op, _ref(module), Tiling(**params), [((), s) for s in shapes], tmp_path)


def test_the_global_variant_refuses_windows():
    with pytest.raises(ValueError, match="reduces whole planes"):
        parts(CASES["max_3s2p1"][0], Tiling("global", BLOCK_Q=4, BLOCK=256))


@pytest.mark.parametrize("case, move", [("max_3s2p1", 0), ("max_3s2p1", 2), ("adaptive_max", 0),
                                        ("global_max", 0), ("global_max", 3)])
def test_nan_propagates_as_in_torch(case, move, tmp_path):
    op, module, _ = CASES[case]
    mod = load(render(op, _ref(module), moves(op)[move].params), tmp_path)
    x = torch.randn(2, 3, 5, 6, 7, device=DEVICE)
    x[0, 0, 2, 3, 4] = float("nan")
    x[1, 2, 0, 0, 0] = float("nan")
    x[0, 1] = -float("inf")  # a plane of -inf: the max is -inf, not NaN
    got, want = mod.ModelNew()(x), mod.Model()(x)
    assert torch.isnan(want).any()
    torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("case, move", [("max_3s2p1", 1), ("avg_no_pad_count", 2), ("adaptive_odd", 0),
                                        ("global_avg", 2), ("global_max", 0)])
def test_half_in_half_out_accumulated_in_fp32(case, move, tmp_path):
    """fp16 in and out; compared with torch on the fp32 input rounded to fp16 (torch's CPU avg_pool3d has no fp16)."""
    op, module, shapes = CASES[case]
    mod = load(render(op, _ref(module), moves(op)[move].params), tmp_path)
    for shape in shapes:
        x = torch.randn(shape, device=DEVICE).half()
        got = mod.ModelNew()(x)
        assert got.dtype == torch.float16
        torch.testing.assert_close(got, mod.Model()(x.float()).half(), rtol=1e-3, atol=1e-3)


def test_a_deep_window_keeps_its_depth_loop_a_loop(tmp_path):
    op = pool("avg", [5, 4, 4], [3, 2, 2], (2, 1, 2), count_include_pad=False)
    _, sources, _ = parts(op)
    assert "for kd in range(5)" in sources[-1] and "for kh in tl.static_range(4)" in sources[-1]
    check(op, _ref("nn.AvgPool3d((5, 4, 4), (3, 2, 2), (2, 1, 2), count_include_pad=False)"), moves(op)[0].params,
          [((), (1, 2, 7, 6, 9))], tmp_path)


def test_output_size_helper_matches_torch():
    for k, s, p, d, ceil, size in itertools.product((1, 2, 3, 4), (1, 2, 3), (0, 1, 2), (1, 2, 3), (False, True),
                                                    (1, 2, 5, 8, 13)):
        try:
            want = nn.functional.max_pool3d(torch.zeros(1, 1, 1, 1, size), (1, 1, k), (1, 1, s), (0, 0, p),
                                            (1, 1, d), ceil).shape[-1]
        except RuntimeError:  # padding over half the kernel, or no output at all
            continue
        assert kc_pool3d_out(size, k, s, p, d, ceil) == want, (k, s, p, d, ceil, size)


def test_pools_in_a_chain(tmp_path):
    """A max pool, a global average pool and a per-channel bias, then a sum over channels (KernelBench's
    8_Conv3d_Divide_Max_GlobalAvgPool_BiasAdd_Sum without its conv): each pool its own op in the chain."""
    ops, source = check_chain(
        tmp_path, "x = self.global_avg_pool(self.max_pool(x / 2.0))\nreturn torch.sum(x + self.bias, dim=1)",
        "self.max_pool = nn.MaxPool3d(2)\nself.global_avg_pool = nn.AdaptiveAvgPool3d((1, 1, 1))\n"
        "self.bias = nn.Parameter(torch.randn(3, 1, 1, 1))", [[(2, 3, 5, 8, 7)], [(1, 3, 4, 4, 4)]])
    assert [op.kind for op in ops] == ["elementwise", "pool3d", "pool3d", "elementwise", "reduce"]
    assert "def kc_pool3d_kernel_op1(" in source and "def kc_mean_reduce_kernel(" in source


@pytest.mark.parametrize("move", [0, 2])
def test_the_suite_problem(move, tmp_path):
    problem = load_problem("level1/maxpool3d")
    op = analyze(problem).single
    check_small_problem(op, problem, moves(op)[move].params, tmp_path, rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("move", [0, 2])
def test_a_window_that_is_the_whole_volume_is_a_global_pool(kind, move, tmp_path):
    """No padding, no dilation: an input exactly the window's size is reduced plane by plane (the reduce kernel),
    a larger one by windows."""
    op = pool(kind, [3, 4, 5], [1, 2, 3], count_include_pad=True)
    module = f"nn.{kind.capitalize()}Pool3d((3, 4, 5), (1, 2, 3))"
    _, sources, body = parts(op, moves(op)[move].params)
    assert f"def kc_{'max' if kind == 'max' else 'mean'}_reduce_kernel(" in "\n".join(sources)
    assert "if (D, H, W) == (3, 4, 5):" in body
    check(op, _ref(module), moves(op)[move].params, [((), (2, 3, 3, 4, 5)), ((), (2, 3, 4, 5)), ((), (1, 2, 5, 6, 7))],
          tmp_path)


@pytest.mark.parametrize("case", ["global_avg", "global_max"])
def test_few_large_volumes_are_split(case, tmp_path):
    op, module, _ = CASES[case]
    for params in moves(op):
        check(op, _ref(module), params.params, [((), (1, 2, 9, 20, 30)), ((), (3, 40, 2, 1, 3))], tmp_path)
