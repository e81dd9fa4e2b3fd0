"""The pooling family: every move of max / avg / adaptive-avg pooling (2-D and 1-D), rendered and run against
torch on awkward shapes (odd sizes, size-1 dims, 3-D inputs), with padding, dilation, ceil_mode,
count_include_pad both ways, strides other than the kernel, non-square kernels and non-divisible adaptive bins.

Without a GPU the kernels run in Triton's interpreter (conftest.py)."""

import itertools
import json

import pytest
import torch
import torch.nn as nn

from kernelcraft.problems import load_problem
from kernelcraft.propose.base import CATEGORIES
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.families.pool.kernels import is_global, kc_pool_out
from tests.propose.builtin.kernel_check import moves, render
from tests.propose.builtin.kernel_check import DEVICE, check, load, reference

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def pool(kind, kernel=None, stride=None, padding=(0, 0), dilation=(1, 1), ceil_mode=False, count_include_pad=True,
         output_size=None, dims=2) -> Op:
    return Op("pool2d", {"pool": kind, "dims": dims, "kernel": kernel, "stride": stride or kernel,
                         "padding": list(padding), "dilation": list(dilation), "ceil_mode": ceil_mode,
                         "count_include_pad": count_include_pad, "output_size": output_size})


def adaptive(output_size, dims=2) -> Op:
    return Op("pool2d", {"pool": "adaptive_avg", "dims": dims, "kernel": None, "stride": None, "padding": None,
                         "dilation": None, "ceil_mode": False, "count_include_pad": False,
                         "output_size": list(output_size)})


SHAPES_4D = [(2, 3, 9, 11), (1, 5, 8, 13), (3, 7, 10)]  # (C, H, W) too; N = 1

CASES = {  # name: (op, module expression, input shapes)
    "max_3s2p1": (pool("max", [3, 3], [2, 2], (1, 1)), "nn.MaxPool2d(3, 2, 1)", SHAPES_4D),
    "max_rect_dil_ceil": (pool("max", [2, 3], [1, 2], (1, 0), (2, 1), ceil_mode=True),
                          "nn.MaxPool2d((2, 3), (1, 2), (1, 0), dilation=(2, 1), ceil_mode=True)", SHAPES_4D),
    "max_2_ceil": (pool("max", [2, 2], ceil_mode=True), "nn.MaxPool2d(2, ceil_mode=True)",
                   [(2, 3, 9, 11), (1, 1, 1, 5), (3, 7, 10)]),
    "avg_3s2p1": (pool("avg", [3, 3], [2, 2], (1, 1)), "nn.AvgPool2d(3, 2, 1)", SHAPES_4D),
    "avg_no_pad_count": (pool("avg", [3, 2], [2, 3], (1, 1), ceil_mode=True, count_include_pad=False),
                         "nn.AvgPool2d((3, 2), (2, 3), 1, ceil_mode=True, count_include_pad=False)", SHAPES_4D),
    "avg_ceil_pad_count": (pool("avg", [3, 3], [2, 2], (1, 1), ceil_mode=True),
                           "nn.AvgPool2d(3, 2, 1, ceil_mode=True)", SHAPES_4D),
    "adaptive_7": (adaptive([7, 7]), "nn.AdaptiveAvgPool2d(7)", [(2, 3, 23, 19), (1, 2, 5, 9), (3, 1, 9)]),
    "adaptive_none_3": (adaptive([None, 3]), "nn.AdaptiveAvgPool2d((None, 3))", [(2, 3, 6, 10), (1, 1, 1, 4),
                                                                                   (2, 5, 7)]),
    "adaptive_global": (adaptive([1, 1]), "nn.AdaptiveAvgPool2d(1)", [(2, 3, 9, 11), (1, 1, 1, 1), (4, 3, 5)]),
    "max1d": (pool("max", [1, 3], [1, 2], (0, 1), (1, 2), dims=1), "nn.MaxPool1d(3, 2, 1, dilation=2)",
              [(2, 3, 17), (1, 1, 5), (4, 9), (2, 1, 2300)]),  # 2300: several 512-wide tiles of one row
    "avg1d": (pool("avg", [1, 3], [1, 2], (0, 1), ceil_mode=True, count_include_pad=False, dims=1),
              "nn.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=False)", [(2, 3, 17), (1, 1, 4), (4, 9),
                                                                              (2, 1, 2300)]),
    "adaptive1d": (adaptive([1, 5], dims=1), "nn.AdaptiveAvgPool1d(5)", [(2, 3, 17), (1, 1, 3), (4, 9)]),
}


def _ref(module: str) -> str:
    return reference("self.pool(x)", "self", f"self.pool = {module}")


# every move on every case: the kernel variant (tile / flat / planes) must not matter
@pytest.mark.parametrize("case, move", [(c, i) for c in sorted(CASES) for i in range(len(moves(CASES[c][0])))])
def test_pool_moves(case, move, tmp_path):
    op, module, shapes = CASES[case]
    check(op, _ref(module), moves(op)[move].params, [((), s) for s in shapes], tmp_path)


COMPILED = {"tile": {"compiled_sizes": True}, "flat": {"variant": "flat", "BLOCK": 512, "num_warps": 8,
                                                       "compiled_sizes": True}}


# sizes compiled in as constexprs (a build per shape), 32-bit offsets, and 64-bit ones where WIDE: every case but the
# global pool's (a row reduction: no sizes to compile in)
@pytest.mark.parametrize("case", sorted(c for c in CASES if not is_global(CASES[c][0])))
@pytest.mark.parametrize("variant", sorted(COMPILED))
@pytest.mark.parametrize("wide_at", [None, 0])
def test_compiled_sizes(case, variant, wide_at, tmp_path, monkeypatch):
    from kernelcraft.propose.builtin.families.pool import kernels

    op, module, shapes = CASES[case]
    if wide_at is not None:  # every launch indexes in 64 bits
        monkeypatch.setattr(kernels, "WIDE_AT", wide_at)
    params = moves(op)[0].params.but(**COMPILED[variant])
    source = render(op, _ref(module), params)
    assert "OW: tl.constexpr" in source and f">= {kernels.WIDE_AT}" in source
    check(op, _ref(module), params, [((), s) for s in shapes], tmp_path)


def test_moves_are_distinct_and_adaptive_packs_planes_first():
    for op in (CASES["max_3s2p1"][0], CASES["adaptive_7"][0]):
        ms = moves(op)
        assert 3 <= len(ms) <= 8 and len({m.text for m in ms}) == len(ms)
        assert len({json.dumps(m.params.to_json(), sort_keys=True) for m in ms}) == len(ms)
        assert all(m.category in CATEGORIES for m in ms)
    assert moves(CASES["adaptive_7"][0])[0].params.BLOCK_P > 1


def test_nan_and_half(tmp_path):
    op, module, _ = CASES["max_3s2p1"]
    src = _ref(module)
    check(op, src, moves(op)[2].params, [((), (2, 3, 9, 11))], tmp_path, dtype=torch.float16, rtol=1e-3, atol=1e-3)
    mod = load(render(op, src, moves(op)[0].params), tmp_path)
    x = torch.randn(1, 2, 7, 8, device=DEVICE)
    x[0, 0, 3, 4] = float("nan")
    x[0, 1, 0, 0] = -float("inf")
    torch.testing.assert_close(mod.ModelNew()(x), mod.Model()(x), equal_nan=True)


def test_output_size_helper_matches_torch():
    for k, s, p, d, ceil, size in itertools.product((1, 2, 3, 4), (1, 2, 3), (0, 1, 2), (1, 2), (False, True),
                                                    (1, 2, 5, 8, 13)):
        detail = pool("max", [1, k], [1, s], (0, p), (1, d), ceil_mode=ceil).detail
        try:
            want = nn.functional.max_pool2d(torch.zeros(1, 1, 1, size), (1, k), (1, s), (0, p), (1, d), ceil).shape
        except RuntimeError:  # padding over half the kernel, or no output at all
            continue
        assert (kc_pool_out(1, 0, detail), kc_pool_out(size, 1, detail)) == tuple(want[-2:]), detail
    assert kc_pool_out(9, 0, adaptive([None, 3]).detail) == 9 and kc_pool_out(9, 1, adaptive([None, 3]).detail) == 3


SUITE = {"maxpool2d": (pool("max", [3, 3], [2, 2], (1, 1)), ()),
         "avgpool2d": (pool("avg", [3, 3], [2, 2], (1, 1)), ()),
         "adaptive_avgpool2d": (adaptive([7, 7]), (7,))}


@pytest.mark.parametrize("name", sorted(SUITE))
def test_suite_problems(name, tmp_path):
    op, init = SUITE[name]
    check(op, load_problem(f"level1/{name}").source, moves(op)[0].params, [(init, (2, 5, 37, 29))], tmp_path)


# ---------------------------------------------------------------- global pools: one row reduction per plane

WHOLE = {  # a window without padding or dilation that is the whole plane at run time: a global pool
    "avg_whole": (pool("avg", [5, 7], ceil_mode=True), "nn.AvgPool2d((5, 7), ceil_mode=True)",
                  [(2, 3, 5, 7), (1, 5, 7), (2, 3, 9, 11)]),
    "max_whole": (pool("max", [4, 4], [2, 2]), "nn.MaxPool2d(4, 2)", [(3, 2, 4, 4), (1, 1, 4, 4), (2, 3, 9, 11)]),
    "avg1d_whole": (pool("avg", [1, 9], dims=1), "nn.AvgPool1d(9)", [(2, 3, 9), (4, 9), (2, 3, 20)]),
}  # the last shape of each is larger than the window: windows


@pytest.mark.parametrize("case", sorted(WHOLE))
@pytest.mark.parametrize("move", [0, 2])
def test_a_window_that_is_the_whole_plane_is_a_global_pool(case, move, tmp_path):
    op, module, shapes = WHOLE[case]
    params = moves(op)[move].params
    source = render(op, _ref(module), params)
    assert "def kc_pool2d_kernel(" in source and "_reduce_kernel[(tiles, 1)]" in source
    check(op, _ref(module), params, [((), s) for s in shapes], tmp_path)


def test_a_global_max_keeps_nan(tmp_path):
    op, module, _ = WHOLE["max_whole"]
    mod = load(render(op, _ref(module), moves(op)[0].params), tmp_path)
    x = torch.randn(2, 3, 4, 4, device=DEVICE)
    x[0, 1, 2, 3] = float("nan")
    x[1, 2] = -float("inf")
    torch.testing.assert_close(mod.ModelNew()(x), mod.Model()(x), equal_nan=True)


@pytest.mark.parametrize("move", range(4))
def test_global_moves_pack_short_planes_and_split_few_long_ones(move, tmp_path):
    op, module, _ = CASES["adaptive_global"]
    assert {m.params.variant for m in moves(op)} == {"global"}
    # few large planes take the split path (fp32 partials, a combining launch); many tiny ones are packed
    check(op, _ref(module), moves(op)[move].params, [((), (1, 2, 70, 90)), ((), (3, 50, 2, 3)), ((), (2, 1, 1, 1))],
          tmp_path)
    check(op, _ref(module), moves(op)[move].params, [((), (2, 3, 20, 30))], tmp_path, dtype=torch.float16, rtol=1e-3,
          atol=1e-3)


def test_the_global_variant_refuses_windows():
    with pytest.raises(ValueError, match="reduces whole planes"):
        render(CASES["max_3s2p1"][0], _ref(CASES["max_3s2p1"][1]), moves(CASES["adaptive_global"][0])[0].params)


def test_a_global_pool_after_a_conv_is_its_pool(tmp_path):
    """KernelBench's 67_Conv2d_GELU_GlobalAvgPool: the pool folded into the conv's op, rendered as the reduction."""
    from tests.propose.builtin.chain_check import check_chain

    ops, source = check_chain(tmp_path, "x = F.gelu(self.conv(x))\nx = F.adaptive_avg_pool2d(x, 1)\n"
                                        "return x.squeeze(-1).squeeze(-1)", "self.conv = nn.Conv2d(3, 5, 3)",
                              [[(2, 3, 9, 12)], [(1, 3, 5, 5)]])
    assert ops[0].kind == "conv2d" and ops[0].detail["pool"]["output_size"] == [1, 1]
    assert "kc_mean_reduce_kernel[" in source and "kc_pool2d_kernel" not in source
