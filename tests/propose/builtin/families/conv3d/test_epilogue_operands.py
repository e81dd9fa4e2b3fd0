"""Parameter operands in the conv3d epilogue (x + self.bias, x * self.scale): folded into the conv by analyze(),
read by the kernel at the output's coordinates and broadcast by torch's rules (per channel, scalars, along one
spatial dim, full), against the reference on odd volumes, batched and not; and what does not fold."""

import pytest

from kernelcraft.propose.builtin.analyze import analyze
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

CONV = "self.conv = nn.Conv3d(3, 4, 3, padding=1)\n"  # the output's (D, H, W) is the input's
FORWARD = "return torch.sigmoid(self.conv(x) + self.a) * self.b"
STEPS = [["tadd", ("attr", "a")], ["sigmoid"], ["tmul", ("attr", "b")]]


def params(a: tuple, b: tuple) -> str:
    return CONV + f"self.a = nn.Parameter(torch.randn({a!r}))\nself.b = nn.Parameter(torch.randn({b!r}))"


@pytest.mark.parametrize("a, b, cases", [
    ((4, 1, 1, 1), (), [[(2, 3, 5, 4, 6)], [(1, 3, 3, 3, 7)], [(3, 4, 5, 6)]]),  # per channel, a scalar; unbatched
    ((1, 4, 1, 1, 1), (1, 1, 1, 1, 1), [[(2, 3, 5, 4, 6)], [(1, 3, 2, 3, 5)]]),  # 5-D: batched inputs only
    ((6,), (4, 1, 1, 6), [[(2, 3, 5, 4, 6)], [(1, 3, 1, 1, 6)], [(3, 3, 2, 6)]]),  # along the width; channel and width
    ((2, 4, 3, 5, 2), (3, 1, 1), [[(2, 3, 3, 5, 2)]]),  # one value per output (batch too); along the depth
    ((1,), (5, 1), [[(1, 3, 2, 5, 3)], [(2, 3, 4, 5, 1)]]),  # one value; along the height
])
def test_parameter_operands_fold_and_match(tmp_path, a, b, cases):
    ops, source = check_chain(tmp_path, FORWARD, params(a, b), cases, single=True)
    assert ops[0].kind == "conv3d" and ops[0].detail["steps"] == STEPS
    assert "kc_operand_args" in source and "kc_bcast_kernel" not in source


def test_another_move_and_a_grouped_strided_conv(tmp_path):
    init = ("self.conv = nn.Conv3d(4, 6, (3, 2, 1), stride=(2, 1, 2), groups=2, bias=False)\n"
            "self.a = nn.Parameter(torch.randn(6, 1, 1, 1))")
    ops, _ = check_chain(tmp_path, "return self.a - torch.relu(self.conv(x)) / self.a", init,
                         [[(2, 4, 5, 4, 7)], [(1, 4, 3, 2, 1)]], move=3, single=True)
    assert ops[0].detail["steps"] == [["relu"], ["tdiv", ("attr", "a")], ["trsub", ("attr", "a")]]


def test_an_operand_that_is_no_parameter_stays_an_elementwise_op(tmp_path):
    analysis = analyze(write(tmp_path, "return torch.relu(self.conv(x)) + y", CONV,
                             "[torch.randn(2, 3, 4, 4, 4), torch.randn(2, 4, 4, 4, 4)]", args="x, y"))
    assert [(op.kind, op.detail["steps"]) for op in analysis.chain] == [
        ("conv3d", [["relu"]]), ("elementwise", [["tadd", ("input", 1)]])]
