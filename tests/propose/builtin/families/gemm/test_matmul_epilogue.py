"""A matmul takes the pointwise steps after it (a scale, an activation) as an epilogue on its fp32 tile: every
matmul move (tiled, GEMV for few columns, TMA where a GPU has it) on 2-D, batched, transposed and matrix-vector
products of odd sizes."""

import pytest

from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.kernel_check import moves
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import DEVICE

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

CASES = [[(5, 7), (7, 9)], [(6, 5), (5, 3)], [(1, 1), (1, 1)]]  # (6, 5) @ (5, 3): few columns, the GEMV kernel


@pytest.mark.parametrize("move", range(len(moves(Op("matmul", {"trans_a": False, "trans_b": False})))))
def test_every_move_applies_the_steps(tmp_path, move):
    params = moves(Op("matmul", {"trans_a": False, "trans_b": False}))[move].params
    tol = 2e-2 if DEVICE == "cuda" and params.precision == "tf32" else 1e-4
    ops, _ = check_chain(tmp_path, "return torch.relu(a @ b) * 0.5 - 1.0", "", CASES, args="a, b", move=move,
                         single=True, rtol=tol, atol=tol)
    assert ops[0].detail["steps"] == [["relu"], ["mul", 0.5], ["sub", 1.0]]


@pytest.mark.parametrize("forward, cases", [
    ("return torch.sigmoid(torch.bmm(a, b.transpose(1, 2)))", [[(3, 4, 9), (3, 5, 9)], [(2, 1, 3), (2, 7, 3)],
                                                                [(1, 6, 33), (1, 2, 33)]]),
    ("return torch.tanh(a.T @ b) / 3.0", [[(7, 5), (7, 9)], [(3, 6), (3, 2)], [(1, 1), (1, 1)]]),
])
def test_transposed_and_batched(tmp_path, forward, cases):
    check_chain(tmp_path, forward, "", cases, args="a, b", single=True)
