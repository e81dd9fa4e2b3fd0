"""The transposed-conv family (sub-pixel phase decomposition of implicit GEMMs): moves against nn.ConvTranspose2d /
F.conv_transpose2d on odd sizes and every kind of hyper-parameter (stride 1 = the plain gather, strides larger
than the kernel, output_padding, dilation sharing a factor with the stride so that some phases get no tap, groups,
depthwise, no bias, unbatched input), with and without an epilogue; and the suite's transposed convs end to end on
their small sizes. On a GPU the reference runs with cuDNN's TF32 off, as under the strict policy."""

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.propose.base import CATEGORIES
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from tests.propose.builtin.kernel_check import moves, needs_relaxed, render
from tests.propose.builtin.kernel_check import check, check_small_problem, reference, move_tolerance as tolerance

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

INIT = "self, cin, cout, k, s=1, p=0, op=0, g=1, b=True, d=1"
CONV = ("self.conv = nn.ConvTranspose2d(cin, cout, k, stride=s, padding=p, output_padding=op, groups=g, bias=b, "
        "dilation=d)")
# (init args, input shape)
CASES = [((7, 5, 4, 2, 1), (2, 7, 5, 6)),  # the suite's 2x upsampling: kernel 4, stride 2, padding 1
         ((3, 4, 3), (1, 3, 4, 5)),  # stride 1: one phase, every tap (the gather formulation)
         ((4, 6, (3, 2), (2, 3), (1, 0), (1, 2), 2, False, (2, 1)), (1, 4, 5, 4)),  # groups, output_padding, dilation
         ((4, 6, 3, 2, 0, 0, 1, True, 2), (1, 4, 5, 4)),  # dilation 2, stride 2: odd phases get bias only
         ((6, 6, 3, 3, 2, 1, 6), (2, 6, 5, 5)),  # depthwise, stride 3, output_padding
         ((3, 5, (1, 3), (3, 1), (0, 1)), (3, 4, 3)),  # unbatched; stride 3 over a 1-tall kernel: taps for one phase
         ((2, 3, 3, 1, 2), (1, 2, 4, 4))]  # padding as large as the kernel: the output shrinks


def convt_op(steps=()) -> Op:
    return Op("conv_transpose2d", {"stride": [1, 1], "padding": [0, 0], "output_padding": [0, 0],
                                   "dilation": [1, 1], "groups": 1, "module": "conv", "groups_attr": None,
                                   "weight": "conv.weight", "bias": "conv.bias", "steps": [list(s) for s in steps]})


def test_moves_are_distinct_and_tf32_is_marked():
    ms = moves(convt_op())
    assert len({m.text for m in ms}) == len(ms) >= 5
    assert all(m.category in CATEGORIES for m in ms)
    assert {m.params.precision for m in ms} == {"ieee", "tf32x3", "tf32"}
    assert all(m.params.precision == "tf32" for m in ms if needs_relaxed(m)) and not needs_relaxed(ms[0])
    assert "phase" in ms[1].text
    strict = BuiltinProposer("cpu").moves(convt_op(), "triton")
    assert strict and not any(m.params.precision == "tf32" for m in strict)


def _id(p) -> str:
    return "{precision}-{BLOCK_M}x{BLOCK_K}".format(**p.to_json()) + ("-one" if p.one_launch else "")


@pytest.mark.parametrize("params", [m.params for m in moves(convt_op())], ids=_id)
def test_conv_transpose2d_moves(params, tmp_path):
    cases = CASES[::2] if params.precision == "tf32" else CASES  # the relaxed moves repeat the exact ones' tiles
    check(convt_op(), reference("self.conv(x)", INIT, CONV), params, cases, tmp_path, **tolerance(params))


@pytest.mark.parametrize("index", [1, 2], ids=["as-conv", "packed"])
def test_epilogue_and_functional_values(index, tmp_path):
    params = moves(convt_op())[index].params
    check(convt_op([["tanh"], ["add", 1.0]]), reference("torch.tanh(self.conv(x)) + 1.0", INIT, CONV), params,
          CASES[:4], tmp_path, **tolerance(params))
    op = Op("conv_transpose2d", {"stride": [2, 3], "padding": [1, 2], "output_padding": [1, 0], "dilation": [1, 2],
                                 "groups": 2, "module": None, "groups_attr": "g", "weight": "w", "bias": "b",
                                 "steps": []})
    ref = reference("F.conv_transpose2d(x, self.w, self.b, (2, 3), (1, 2), (1, 0), self.g, (1, 2))", "self",
                    "self.g = 2\nself.w = nn.Parameter(torch.randn(4, 3, 3, 4))\nself.b = nn.Parameter(torch.randn(6))")
    check(op, ref, params, [((), (2, 4, 5, 3)), ((), (1, 4, 1, 1))], tmp_path, **tolerance(params))


def test_half_inputs(tmp_path):
    check(convt_op(), reference("self.conv(x)", INIT, CONV), moves(convt_op())[1].params, CASES[:3], tmp_path,
          rtol=1e-2, atol=1e-2, dtype=torch.float16)


@pytest.mark.parametrize("name, steps", [("level1/conv_transpose2d", []), ("level2/conv_transpose2d_tanh", [["tanh"]])])
def test_suite_transposed_convs_are_covered_and_match_on_their_small_sizes(name, steps, tmp_path):
    problem = load_problem(name)
    engineer = BuiltinProposer("cpu")
    op = engineer.coverage(problem, "triton").single
    assert op.kind == "conv_transpose2d" and op.detail["steps"] == steps
    ms = engineer.moves(op, "triton")
    exact = next(m for m in ms if m.params.precision == "ieee")
    for move in (ms[0], ms[1], exact):  # 3xTF32 over the taps (first), the second move, exact fp32
        check_small_problem(op, problem, move.params, tmp_path)


def test_one_launch_moves_take_every_phase_in_one_grid(tmp_path):
    one = [m for m in moves(convt_op()) if m.params.one_launch]
    assert [m.params.precision for m in one] == ["tf32x3", "ieee"]
    source = render(convt_op(), reference("self.conv(x)", INIT, CONV), one[0].params)
    assert source.count("kc_conv_transpose2d_phases_kernel[grid](") == 1 and "for rh in" not in source
    check(convt_op([["tanh"]]), reference("torch.tanh(self.conv(x))", INIT, CONV), one[1].params, CASES[2:5],
          tmp_path)


class Grids:
    """A `check(patch=...)` spy: the grids the kernel `name` is launched on."""

    def __init__(self, name: str):
        self.name, self.seen = name, []

    def __call__(self, module) -> None:
        kernel, seen = getattr(module, self.name), self.seen

        class Launched:
            def __getitem__(self, grid):
                seen.append(grid)
                return kernel[grid]
        setattr(module, self.name, Launched())


def test_one_launch_puts_the_phase_fastest_on_the_first_grid_axis(tmp_path):
    """The phases of a tile are neighbouring programs (so that together they fill y's lines while in L2): the first
    axis walks (tile, phase), the groups the second. CASES[2]: stride (2, 3), 2 groups, output padding (1, 2), so
    the phases' outputs differ in number: the shorter ones' rows past their outputs are masked."""
    one = next(m for m in moves(convt_op()) if m.params.one_launch).params
    spy = Grids("kc_conv_transpose2d_phases_kernel")
    check(convt_op(), reference("self.conv(x)", INIT, CONV), one, CASES[2:3], tmp_path, patch=spy, **tolerance(one))
    # x (1, 4, 5, 4), kernel (3, 2), padding (1, 0), dilation (2, 1): OH = 4*2 - 2 + 2*2 + 1 + 1 = 12, OW = 3*3 + 1
    # + 2 + 1 = 13; phase (0, 0)'s grid of rows 6 x 5 (one 128-row tile), 3 out-channels a group (one 16-wide
    # channel tile), 6 phases, 2 groups
    assert spy.seen == [(6, 2)]
