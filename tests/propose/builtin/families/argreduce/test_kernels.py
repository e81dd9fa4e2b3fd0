"""The arg-reduction family: every move of argmax / argmin over the last, first and a middle dim and over all
elements, with keepdim, size-1 dims, odd sizes and rows long enough for the tiled and split paths; ties give the
first index and NaN wins, as in torch.

Without a GPU the kernels run in Triton's interpreter (conftest.py)."""

import json
from pathlib import Path

import pytest
import torch

from kernelcraft.propose.base import CATEGORIES
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import moves, render
from tests.propose.builtin.kernel_check import DEVICE, check, load, reference

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

LEVEL1 = Path(__file__).resolve().parents[5] / "src" / "kernelcraft" / "problems" / "level1"


def arg(kind="argmax", dim=-1, keepdim=False, dim_attr=None) -> Op:
    return Op("argreduce", {"op": kind, "dim": dim, "dim_attr": dim_attr, "keepdim": keepdim})


MOVES = moves(arg())
# (op, forward expression, input shapes): every dim position, R from 1 to past the tile and split sizes
CASES = [
    (arg("argmax", -1), "torch.argmax(x, dim=-1)", [(3, 37), (5, 1), (2, 3, 2500)]),
    (arg("argmin", 0, keepdim=True), "torch.argmin(x, 0, keepdim=True)", [(37, 5), (1, 7), (3000, 3)]),
    (arg("argmax", 1), "x.argmax(1)", [(3, 17, 5), (2, 1, 9), (2, 1500, 3)]),
    (arg("argmin", None), "torch.argmin(x)", [(3, 17, 5), (1,), (5000,)]),
    (arg("argmax", None, keepdim=True), "torch.argmax(x, keepdim=True)", [(3, 7), (1, 1, 1), (2, 2100)]),
]


def test_moves_are_distinct():
    assert 3 <= len(MOVES) <= 8 and len({m.text for m in MOVES}) == len(MOVES)
    assert len({json.dumps(m.params.to_json(), sort_keys=True) for m in MOVES}) == len(MOVES)
    assert all(m.category in CATEGORIES for m in MOVES)


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("move", range(len(MOVES)))
def test_argreduce_moves(case, move, tmp_path):
    op, expr, shapes = CASES[case]
    check(op, reference(expr), MOVES[move].params, [((), s) for s in shapes], tmp_path, rtol=0, atol=0)


@pytest.mark.parametrize("move", range(len(MOVES)))
def test_ties_nan_and_infinities_follow_torch(move, tmp_path):
    for kind in ("argmax", "argmin"):
        for dim in (1, 0):
            op = arg(kind, dim)
            mod = load(render(op, reference(f"torch.{kind}(x, {dim})"), MOVES[move].params), tmp_path)
            x = torch.randint(0, 3, (6, 2100)).float()  # many ties, in several tiles and splits
            x[1, 1700] = x[1, 1900] = float("nan")  # first NaN wins, even in a later tile
            x[2, :] = -float("inf")
            x[3, :] = float("inf")
            x[4, 5] = float("nan")
            x[4, 2000] = 5.0
            x[5, 1500] = 7.0  # a larger value in a later tile
            x = (x if dim == 1 else x.T.contiguous()).to(DEVICE)  # the same rows reduced along the first dim
            want = getattr(torch, kind)(x, dim)
            torch.testing.assert_close(mod.ModelNew()(x), want, rtol=0, atol=0)
            xh = x.half()
            torch.testing.assert_close(mod.ModelNew()(xh), getattr(torch, kind)(xh, dim), rtol=0, atol=0)


def test_suite_problem(tmp_path):
    op = arg("argmax", -1, dim_attr="dim")
    check(op, (LEVEL1 / "argmax.py").read_text(), MOVES[0].params, [((-1,), (3, 37, 130)), ((1,), (3, 37, 130))],
          tmp_path, rtol=0, atol=0)


def test_an_argmax_after_a_scan_in_a_chain(tmp_path):
    ops, source = check_chain(tmp_path, "return torch.argmax(torch.cumsum(x, 1), 0)", "",
                              [[(3, 40)], [(2500, 3)]], rtol=0, atol=0)
    assert [op.kind for op in ops] == ["scan", "argreduce"]
    assert "def kc_argmax_kernel_op1(" in source and source.count("def kc_tiles(") == 1


@pytest.mark.parametrize("move", range(len(MOVES)))
def test_integers_past_fp32_precision_are_compared_exactly(move, tmp_path):
    """Values 2**30 + k differ by less than fp32's step there (128): compared as floats they would tie and the first
    index would win; compared as integers the largest (smallest) wins, in one tile, across tiles and across splits."""
    for kind in ("argmax", "argmin"):
        for dim in (1, 0):
            op = arg(kind, dim)
            mod = load(render(op, reference(f"torch.{kind}(x, {dim})"), MOVES[move].params), tmp_path)
            for dtype in (torch.int32, torch.int64):
                x = torch.full((4, 2100), 2 ** 30, dtype=dtype)
                x[0, 3], x[0, 7] = 2 ** 30 + 1, 2 ** 30 - 1  # one tile
                x[1, 100], x[1, 2050] = 2 ** 30 + 1, 2 ** 30 + 2  # the winner in a later tile
                x[2, 5], x[2, 1999] = 2 ** 30 - 2, 2 ** 30 - 1
                x[3] = torch.randint(-2 ** 31, 2 ** 31 - 1, (2100,), dtype=dtype)
                x = (x if dim == 1 else x.T.contiguous()).to(DEVICE)
                torch.testing.assert_close(mod.ModelNew()(x), getattr(torch, kind)(x, dim), rtol=0, atol=0)
            x = (torch.arange(2100, dtype=torch.int64) * 3 + 2 ** 40).repeat(2, 1)  # beyond int32 too
            x[1] = x[1].flip(0)
            x = (x if dim == 1 else x.T.contiguous()).to(DEVICE)
            torch.testing.assert_close(mod.ModelNew()(x), getattr(torch, kind)(x, dim), rtol=0, atol=0)
