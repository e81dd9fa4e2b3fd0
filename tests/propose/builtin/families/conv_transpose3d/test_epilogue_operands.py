"""Parameter operands in the transposed 3-D conv's epilogue (x + self.bias, x * self.scale): folded into the conv by
analyze() and read by each phase's kernel at the outputs' true coordinates (a phase writes every stride-th output
along each axis), broadcast by torch's rules (per channel, scalars, along one axis, full), against the reference on
odd volumes, batched and not, a launch per phase and every phase in one launch; and what does not fold."""

import pytest

from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import moves
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# the moves: a launch per phase (exact fp32), every phase in one launch
MOVES = [next(i for i, m in enumerate(moves(Op("conv_transpose3d"))) if not m.params.one_launch),
         next(i for i, m in enumerate(moves(Op("conv_transpose3d"))) if m.params.one_launch)]
FORWARD = "return torch.sigmoid(self.conv(x) * self.a) + self.b"
STEPS = [["tmul", ("attr", "a")], ["sigmoid"], ["tadd", ("attr", "b")]]
# (3, 2, 3) -> (6, 4, 6): stride 2, padding 1, output_padding 1
CONV = "self.conv = nn.ConvTranspose3d(3, 4, 3, stride=2, padding=1, output_padding=1)\n"
# (3, 2, 2) -> (5, 7, 4): a stride per axis (phases of unequal sizes), a 1-wide kernel along W
UNEVEN = ("self.conv = nn.ConvTranspose3d(3, 4, (3, 3, 1), stride=(2, 3, 2), padding=(1, 0, 0), "
          "output_padding=(0, 1, 1))\n")


def params(conv: str, a: tuple, b: tuple) -> str:
    return conv + f"self.a = nn.Parameter(torch.randn({a!r}))\nself.b = nn.Parameter(torch.randn({b!r}))"


CASES = [  # (the conv, a's shape, b's shape, input shapes)
    (CONV, (4, 1, 1, 1), (), [[(2, 3, 3, 2, 3)], [(1, 3, 1, 2, 2)], [(3, 3, 2, 3)]]),  # per channel, a scalar
    (CONV, (1, 4, 1, 1, 1), (1, 1, 1, 1, 1), [[(2, 3, 3, 2, 3)], [(1, 3, 2, 1, 2)]]),  # 5-D: batched inputs only
    (CONV, (6,), (4, 1, 1, 6), [[(2, 3, 3, 2, 3)], [(3, 1, 1, 3)]]),  # along the width; channel and width
    (CONV, (2, 4, 6, 4, 6), (6, 1, 1), [[(2, 3, 3, 2, 3)]]),  # one value per output (batch too); along the depth
    (UNEVEN, (4, 5, 7, 4), (7, 1), [[(2, 3, 3, 2, 2)], [(3, 3, 2, 2)]]),  # every output of a volume; the height
]


@pytest.mark.parametrize("move", MOVES, ids=["per-phase", "one-launch"])
@pytest.mark.parametrize("conv, a, b, cases", CASES)
def test_parameter_operands_fold_and_match(tmp_path, conv, a, b, cases, move):
    ops, source = check_chain(tmp_path, FORWARD, params(conv, a, b), cases, move=move, single=True)
    assert ops[0].kind == "conv_transpose3d" and ops[0].detail["steps"] == STEPS
    assert "kc_operand_args" in source and "kc_bcast_kernel" not in source


def test_a_grouped_conv_without_bias_and_phases_no_tap_reaches(tmp_path):
    """Dilation 2 and stride 2 along D: odd depth phases get the epilogue only, their operand values included."""
    init = ("self.conv = nn.ConvTranspose3d(4, 6, (3, 2, 2), stride=2, groups=2, dilation=(2, 1, 1), bias=False)\n"
            "self.a = nn.Parameter(torch.randn(6, 1, 1, 1))")
    for move in MOVES:
        ops, _ = check_chain(tmp_path, "return self.a / torch.relu(self.conv(x) - self.a)", init,
                             [[(2, 4, 3, 2, 3)], [(4, 2, 3, 2)]], move=move, single=True)
        assert ops[0].detail["steps"] == [["tsub", ("attr", "a")], ["relu"], ["trdiv", ("attr", "a")]]


def test_an_operand_that_is_no_parameter_stays_an_elementwise_op(tmp_path):
    analysis = analyze(write(tmp_path, "return torch.relu(self.conv(x)) * y", CONV,
                             "[torch.randn(2, 3, 3, 2, 3), torch.randn(2, 4, 6, 4, 6)]", args="x, y"))
    assert [(op.kind, op.detail["steps"]) for op in analysis.chain] == [
        ("conv_transpose3d", [["relu"]]), ("elementwise", [["tmul", ("input", 1)]])]
