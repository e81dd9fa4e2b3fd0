"""Parameter operands in the transposed convs' epilogue (x + self.bias, x * self.scale), 2-D and 1-D: folded into
the conv by analyze() and read by each phase's kernel at the outputs' true coordinates (a phase writes every
stride-th output), broadcast by torch's rules (per channel, scalars, along a spatial dim, full), against the
reference on odd sizes, batched and not, a launch per phase and every phase in one launch; and what does not fold."""

import pytest

from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import moves
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# the moves: a launch per phase (exact fp32), every phase in one launch
MOVES = [next(i for i, m in enumerate(moves(Op("conv_transpose2d"))) if not m.params.one_launch
              and m.params.precision == "ieee"),
         next(i for i, m in enumerate(moves(Op("conv_transpose2d"))) if m.params.one_launch)]
FORWARD = "return torch.tanh(self.conv(x) - self.a) * self.b"
STEPS = [["tsub", ("attr", "a")], ["tanh"], ["tmul", ("attr", "b")]]
STRIDE_2 = "self.conv = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1)\n"  # (5, 4) -> (10, 8)
STRIDE_3_2 = "self.conv = nn.ConvTranspose2d(3, 4, (3, 2), stride=(3, 2), padding=(1, 0))\n"  # (4, 3) -> (10, 6)
STRIDE_2_1D = "self.conv = nn.ConvTranspose1d(3, 4, 3, stride=2)\n"  # 5 -> 11


def params(conv: str, a: tuple, b: tuple) -> str:
    return conv + f"self.a = nn.Parameter(torch.randn({a!r}))\nself.b = nn.Parameter(torch.randn({b!r}))"


CASES = [  # (the conv, a's shape, b's shape, input shapes)
    (STRIDE_2, (4, 1, 1), (), [[(2, 3, 5, 4)], [(1, 3, 3, 3)], [(3, 5, 4)]]),  # per channel, a scalar; unbatched
    (STRIDE_2, (1, 4, 1, 1), (1, 1, 1, 1), [[(2, 3, 5, 4)], [(1, 3, 2, 7)]]),  # 4-D: batched inputs only
    (STRIDE_2, (8,), (4, 1, 8), [[(2, 3, 5, 4)], [(1, 3, 1, 4)], [(3, 2, 4)]]),  # along the width; channel, width
    (STRIDE_2, (2, 4, 10, 8), (10, 1), [[(2, 3, 5, 4)]]),  # one value per output (batch too); along the height
    (STRIDE_2, (1,), (4, 10, 8), [[(1, 3, 5, 4)], [(3, 5, 4)]]),  # one value; every output of an image
    (STRIDE_3_2, (4, 10, 6), (10, 1), [[(2, 3, 4, 3)], [(3, 4, 3)]]),  # phases of unequal sizes
    (STRIDE_2_1D, (4, 1), (), [[(2, 3, 5)], [(3, 5)]]),  # 1-D: per channel, a scalar; unbatched
    (STRIDE_2_1D, (11,), (1, 4, 11), [[(2, 3, 5)], [(1, 3, 5)]]),  # along the length; channel and length
    (STRIDE_2_1D, (2, 4, 11), (1,), [[(2, 3, 5)]]),  # one value per output
]


@pytest.mark.parametrize("move", MOVES, ids=["per-phase", "one-launch"])
@pytest.mark.parametrize("conv, a, b, cases", CASES)
def test_parameter_operands_fold_and_match(tmp_path, conv, a, b, cases, move):
    ops, source = check_chain(tmp_path, FORWARD, params(conv, a, b), cases, move=move, single=True)
    assert ops[0].kind == ("conv_transpose1d" if "1d" in conv else "conv_transpose2d")
    assert ops[0].detail["steps"] == STEPS
    assert "kc_operand_args" in source and "kc_bcast_kernel" not in source


def test_a_grouped_dilated_conv_with_phases_no_tap_reaches(tmp_path):
    """Dilation 2 and stride 2: odd phases get bias and the epilogue only, their operand values included."""
    init = ("self.conv = nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2, dilation=2)\n"
            "self.a = nn.Parameter(torch.randn(6, 1, 1))\nself.b = nn.Parameter(torch.randn(13))")
    for move in MOVES:
        ops, _ = check_chain(tmp_path, "return torch.relu(self.conv(x) * self.a + self.b)", init,
                             [[(2, 4, 5, 5)], [(4, 3, 5)]], move=move, single=True)
        assert ops[0].detail["steps"] == [["tmul", ("attr", "a")], ["tadd", ("attr", "b")], ["relu"]]


def test_an_operand_that_is_no_parameter_stays_an_elementwise_op(tmp_path):
    analysis = analyze(write(tmp_path, "return torch.relu(self.conv(x)) * y", STRIDE_2,
                             "[torch.randn(2, 3, 5, 4), torch.randn(2, 4, 10, 8)]", args="x, y"))
    assert [(op.kind, op.detail["steps"]) for op in analysis.chain] == [
        ("conv_transpose2d", [["relu"]]), ("elementwise", [["tmul", ("input", 1)]])]


def test_a_chain_of_convs_with_operands_defines_the_shared_helper_once(tmp_path):
    init = ("self.up = nn.ConvTranspose2d(3, 4, 3, stride=2)\nself.conv = nn.Conv2d(4, 5, 3)\n"
            "self.a = nn.Parameter(torch.randn(4, 1, 1))\nself.b = nn.Parameter(torch.randn(5, 1, 1))")
    ops, source = check_chain(tmp_path, "return torch.relu(self.conv(torch.tanh(self.up(x) + self.a)) * self.b)", init,
                              [[(2, 3, 4, 5)], [(3, 3, 4)]])
    assert [(op.kind, [s[0] for s in op.detail["steps"]]) for op in ops] == [
        ("conv_transpose2d", ["tadd", "tanh"]), ("conv2d", ["tmul", "relu"])]
    assert source.count("def kc_operand_args(") == 1
