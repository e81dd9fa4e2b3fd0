"""Transposed 1-D convolutions (nn.ConvTranspose1d), run as one-row transposed 2-D ones: strides, padding,
output_padding, dilation, groups, no bias, unbatched input and an epilogue, each at two input shapes and under the
per-phase and the one-launch moves, compared with torch. Without a GPU in Triton's interpreter (conftest.py)."""

import pytest

from tests.propose.builtin import kernel_check
from kernelcraft.propose.builtin.analyze import analyze
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

CASES = [  # (nn.ConvTranspose1d arguments, input shapes)
    ("4, 6, 3", [(2, 4, 11), (1, 4, 5)]),
    ("4, 6, 5, stride=3, padding=2, output_padding=1", [(2, 4, 9), (3, 4, 4)]),
    ("6, 4, 3, stride=2, dilation=3, groups=2, bias=False", [(2, 6, 10), (1, 6, 7)]),
    ("3, 5, 4, stride=2, padding=1, dilation=2", [(3, 7), (3, 12)]),  # unbatched (C, L)
]


def _moves(args: str, tmp_path) -> list[int]:
    """The first move (a launch per output phase) and the first one-launch move."""
    problem = write(tmp_path, "return self.conv(x)", f"self.conv = nn.ConvTranspose1d({args})",
                    inputs="[torch.randn(2, 8, 9)]")
    ms = kernel_check.moves(analyze(problem).single)
    return [0, next(i for i, m in enumerate(ms) if m.params.one_launch)]


@pytest.mark.parametrize("args,shapes", CASES, ids=[c[0] for c in CASES])
def test_conv_transpose1d(args, shapes, tmp_path):
    for move in _moves(args, tmp_path):
        ops, _ = check_chain(tmp_path, "return self.conv(x)", f"self.conv = nn.ConvTranspose1d({args})",
                             [[s] for s in shapes], move=move, single=True)
        assert ops[0].kind == "conv_transpose1d" and ops[0].detail["module"] == "conv"


def test_conv_transpose1d_epilogue(tmp_path):
    ops, _ = check_chain(tmp_path, "return torch.tanh(self.conv(x)) * 2.0",
                         "self.conv = nn.ConvTranspose1d(4, 8, 3, stride=2)", [[(2, 4, 13)], [(1, 4, 6)]], single=True)
    assert ops[0].detail["steps"] == [["tanh"], ["mul", 2.0]]
    assert ops[0].detail["stride"] == [1, 2] and ops[0].detail["padding"] == [0, 0]
