"""Softmax and log_softmax over a dim that is not the last (the column kernel: one outer index and adjacent columns
of the inner dims per program) on every move and awkward shapes (inner not a multiple of the tile, size-1 dims, a
reduced dim long enough for the online path), and the pointwise steps after a softmax as its epilogue, parameter
operands too (a per-channel bias after a softmax over channels, operands along the inner dims or the rows, one
that is expanded first), against the reference; KernelBench's softmax problems at small sizes."""

import pytest

from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import check, ident, moves, reference

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's NaN/inf notes from the interpreter

COLUMN_CASES = [(1, (3, 37, 5, 7)), (0, (5000, 3)), (2, (2, 3, 1, 130)), (1, (2, 1, 9)), (1, (1, 300, 67)),
                (-3, (2, 6, 1, 1))]  # inner 35; R long (online); R 1; inner 1 after a middle dim (rows)
MOVES = [(kind, m.params) for kind in ("softmax", "log_softmax") for m in moves(Op(kind, {"dim": 1}))]


@pytest.mark.parametrize("kind,params", MOVES, ids=lambda v: v if isinstance(v, str) else ident(v))
def test_a_leading_or_middle_dim_on_every_move(kind, params, tmp_path):
    for dim, shape in COLUMN_CASES:
        check(Op(kind, {"dim": dim}), reference(f"torch.{kind}(x, dim={dim})"), params, [((), shape)], tmp_path)


FORWARD = "return torch.sigmoid((torch.softmax(x, dim=1) + self.bias) * 2.0)"  # 91 of KernelBench level 2
STEPS = [["tadd", ("attr", "bias")], ["mul", 2.0], ["sigmoid"]]


@pytest.mark.parametrize("move", range(len(moves(Op("softmax", {"dim": 1})))))
def test_a_per_channel_bias_after_a_softmax_over_channels_on_every_move(move, tmp_path):
    ops, source = check_chain(tmp_path, FORWARD, "self.bias = nn.Parameter(torch.randn(6, 1, 1))",
                              [[(2, 6, 5, 7)], [(1, 6, 1, 1)], [(6, 3, 130)], [(1, 6, 9, 70)]], move=move,
                              single=True)
    assert ops[0].kind == "softmax" and ops[0].detail["steps"] == STEPS
    assert "kc_operand_args" in source and "kc_bcast_kernel" not in source


@pytest.mark.parametrize("kind", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim, init, cases", [
    (1, "(7,)", [(2, 6, 3, 7), (1, 6, 1, 7)]),  # along the inner dims' last: expanded over (H, W)
    (1, "(3, 7)", [(2, 6, 3, 7)]),  # along the whole inner run: read flat
    (2, "(2, 6, 1, 1)", [(2, 6, 5, 7)]),  # along the outer run
    (-1, "(9,)", [(4, 9), (2, 3, 9)]),  # along the last dim's rows
    (-1, "(4, 1)", [(4, 9), (2, 4, 300)]),  # one per row
    (0, "(())", [(5000, 3)]),  # one value; the online path
])
def test_operands_of_other_shapes(kind, dim, init, cases, tmp_path):
    forward = f"x = torch.{kind}(x, dim={dim}) * self.w\nreturn x * torch.sigmoid(x)"
    ops, _ = check_chain(tmp_path, forward, f"self.w = nn.Parameter(torch.randn{init})", [[c] for c in cases],
                         single=True)
    assert ops[0].detail["steps"] == [["tmul", ("attr", "w")], ["sigmoid"], ["tmul", ("step", 1)]]


def test_a_sigmoid_after_a_softmax_over_channels_folds(tmp_path):  # 49 of KernelBench level 2
    ops, _ = check_chain(tmp_path, "return torch.sigmoid(torch.softmax(x, dim=1))", "",
                         [[(2, 4, 3, 5, 7)], [(1, 4, 1, 1, 1)]], single=True)
    assert ops[0].detail["steps"] == [["sigmoid"]]


def test_a_mean_then_a_bias_then_a_softmax_with_its_epilogue(tmp_path):  # 13 of KernelBench level 2
    ops, _ = check_chain(tmp_path, "x = x.mean(dim=2, keepdim=True) + self.bias\n"
                         "return torch.tanh(torch.softmax(x, dim=1)) * 2.0",
                         "self.bias = nn.Parameter(torch.randn(1, 4, 1, 1, 1))", [[(2, 4, 3, 5, 7)], [(1, 4, 2, 1, 3)]])
    assert [(op.kind, op.detail.get("steps")) for op in ops][-1] == ("softmax", [["tanh"], ["mul", 2.0]])
