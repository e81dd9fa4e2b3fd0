"""The rows families' softmax, log_softmax and reductions (sum, mean, max, min): every move, rendered and run
against torch on small but awkward shapes (non-powers-of-two, odd tails, 1-element dims, reductions over the
first and middle dims, rows long enough to take the tiled / online / split paths), and the suite's own problems.
Without a GPU in Triton's interpreter (conftest.py)."""

from pathlib import Path

import pytest
import torch

from kernelcraft.propose.builtin.families.rows import LONG, TILED, Reduce, Softmax
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.kernel_check import Keywords, check, ident, moves, reference

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's NaN/inf notes from the interpreter

LEVEL1 = Path(__file__).resolve().parents[5] / "src" / "kernelcraft" / "problems" / "level1"
SUM = Op("reduce", {"op": "sum", "dim": 1, "dim_attr": None, "keepdim": False})


def test_moves_are_typed_and_their_ideas_follow_the_parameters():
    for kind in ("softmax", "log_softmax"):
        ms = moves(Op(kind, {"dim": 1}))
        assert all(isinstance(m.params, Softmax) for m in ms) and 3 <= len(ms) <= 8
        assert [m.params.variant for m in ms].count("online") == 2
        assert all(f"{m.params.num_warps} warps" in m.text for m in ms)
    ms = moves(SUM)
    assert all(isinstance(m.params, Reduce) for m in ms) and 3 <= len(ms) <= 8
    assert [m.category for m in ms if not m.params.split_target] == ["control"]
    with pytest.raises(ValueError, match="variant"):
        Softmax("rows")


# ---------------------------------------------------------------- softmax / log_softmax

SOFTMAX_CASES = {-1: [(3, 17), (1, 1), (2, 20000)], 1: [(5, 1000), (2, 3, 130)], 0: [(7, 5), (2500, 3)]}
SOFTMAX_MOVES = [(kind, m.params) for kind in ("softmax", "log_softmax") for m in moves(Op(kind, {"dim": 1}))]


@pytest.mark.parametrize("kind,params", SOFTMAX_MOVES, ids=lambda v: v if isinstance(v, str) else ident(v))
def test_softmax_moves(kind, params, tmp_path):
    for dim, shapes in SOFTMAX_CASES.items():
        check(Op(kind, {"dim": dim}), reference(f"torch.{kind}(x, dim={dim})"), params, [((), s) for s in shapes],
              tmp_path)


def test_softmax_half_and_extreme_rows(tmp_path):
    check(Op("softmax", {"dim": -1}), reference("torch.softmax(x, dim=-1)"), {}, [((), (4, 333))], tmp_path,
          rtol=2e-3, atol=2e-3, dtype=torch.float16)
    for params in (moves(Op("softmax", {"dim": -1}))[0].params, {"variant": "online", "BLOCK_R": 64}):
        check(Op("log_softmax", {"dim": -1}), reference("torch.log_softmax(x, dim=-1)"), params,
              [((), (3, 300), 1000.0)], tmp_path, rtol=1e-5, atol=1e-3)


# ---------------------------------------------------------------- reduce

TORCH_REDUCE = {"sum": "torch.sum", "mean": "torch.mean", "max": "torch.amax", "min": "torch.amin"}
REDUCE_CASES = [  # (op, keepdim, dim, shapes)
    ("sum", False, -1, [(3, 17), (2, 3, 130), (1, 1)]), ("mean", True, 1, [(5, 1000), (2, 37, 5), (4, 3000, 2)]),
    ("max", False, 0, [(7, 5), (3000, 3), (1,)]), ("min", True, 1, [(2, 3, 130), (2, 1, 3)]),
    ("sum", False, None, [(5, 1000), (1, 1)]), ("mean", True, None, [(3, 17)]),
]


@pytest.mark.parametrize("params", [m.params for m in moves(SUM)], ids=ident)
def test_reduce_moves(params, tmp_path):
    for name, keep, dim, shapes in REDUCE_CASES:
        ref = reference(f"{TORCH_REDUCE[name]}(x, dim=self.dim, keepdim={keep})", "self, dim", "self.dim = dim")
        op = Op("reduce", {"op": name, "dim": None, "dim_attr": "dim", "keepdim": keep})
        check(op, ref, params, [((dim,), s) for s in shapes], tmp_path)


def test_the_first_move_takes_its_long_tiles_from_a_reduced_dim_of_block_r(tmp_path):
    """R >= BLOCK_R: LONG's tiles and warps (each launch, the split's combining one too); shorter: TILE's."""
    first = moves(SUM)[0].params
    assert first.long == LONG and first.but(long=None) == TILED[0] and f"{LONG[0]}-element" in moves(SUM)[0].text
    ref = reference("torch.sum(x, dim=1)")
    cases = [((3, first.BLOCK_R, 5), LONG[1]), ((3, first.BLOCK_R - 1, 5), first.num_warps),
             ((2, 3 * first.BLOCK_R + 7), LONG[1]), ((4, 130), first.num_warps)]  # (2, 3079): split, then combined
    for i, (shape, warps) in enumerate(cases):
        spy, work = Keywords("kc_sum_reduce_kernel", "num_warps"), tmp_path / str(i)
        work.mkdir()
        check(SUM, ref, first, [((), shape)], work, patch=spy, rtol=1e-4, atol=1e-4)
        assert spy.seen and set(spy.seen) == {warps}, (shape, spy.seen)


def test_reduce_constant_dim_and_values_of_max(tmp_path):
    op = Op("reduce", {"op": "max", "dim": 1, "dim_attr": None, "keepdim": False})
    check(op, reference("torch.max(x, dim=1).values"), {}, [((), (3, 130, 37)), ((), (2, 1))], tmp_path)


# ---------------------------------------------------------------- the suite's own level1 problems

SUITE = {  # problem: (op, init args, input shape)
    "softmax": (Op("softmax", {"dim": 1}), (), (37, 1000)),
    "log_softmax": (Op("log_softmax", {"dim": 1}), (), (37, 1000)),
    "sum_dim": (Op("reduce", {"op": "sum", "dim": None, "dim_attr": "dim", "keepdim": False}), (-1,), (3, 37, 130)),
    "mean_dim": (Op("reduce", {"op": "mean", "dim": None, "dim_attr": "dim", "keepdim": False}), (1,), (3, 130, 37)),
    "max_dim": (Op("reduce", {"op": "max", "dim": None, "dim_attr": "dim", "keepdim": False}), (1,), (3, 130, 37)),
}


@pytest.mark.parametrize("name", list(SUITE))
def test_suite_problems(name, tmp_path):
    op, init, shape = SUITE[name]
    check(op, (LEVEL1 / f"{name}.py").read_text(), moves(op)[0].params, [(init, shape)], tmp_path, rtol=1e-4,
          atol=1e-4)
