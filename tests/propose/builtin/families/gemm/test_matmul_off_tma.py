"""Where a 3xTF32 TMA move's TMA path does not run (off a Hopper GPU: here, in the interpreter) and for split-K,
its strided kernel runs exact fp32 at the first exact move's tiles, not 3xTF32 at the TMA tiles (Tiles.strided);
its text says so. Checked by a spy on the launches' constants, and against torch."""

import pytest
import torch

from kernelcraft.propose.builtin.families.gemm.tiles import EXACT_TILES
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.families.gemm.test_linear import linear_op
from tests.propose.builtin.families.gemm.test_matmul import mm_reference
from tests.propose.builtin.kernel_check import DEVICE, Keywords, ident, load, moves, reference, render

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

MM = Op("matmul", {"trans_a": False, "trans_b": False})
TF32X3_TMA = [m for op in (MM, linear_op()) for m in moves(op) if m.params.tma and m.params.precision == "tf32x3"]


TILES = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "PREC", "num_warps", "num_stages")  # what a spy reads of each launch
EXACT = dict(zip(("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"), EXACT_TILES), PREC="ieee")


def test_the_first_exact_move_has_those_tiles():
    first_exact = next(m.params for m in moves(MM) if m.params.precision == "ieee")
    assert (first_exact.BLOCK_M, first_exact.BLOCK_N, first_exact.BLOCK_K, first_exact.num_warps,
            first_exact.num_stages) == EXACT_TILES
    assert first_exact.strided() is first_exact


@pytest.mark.parametrize("move", TF32X3_TMA, ids=lambda m: ident(m.params))
def test_text_says_what_runs_off_tma(move):
    assert "exact fp32 products (ieee) at 128x128 tiles (32-wide K steps, 8 warps, 3 stages)" in move.text
    # split-K's parts take the strided kernel unless they run on the TMA kernel (split_k_tma)
    assert ("for split-K" in move.text) == (move.params.split_k and not move.params.split_k_tma)
    q = move.params.strided()
    assert (q.precision, q.tma, q.BLOCK_M, q.BLOCK_N, q.split_k) == ("ieee", False, 128, 128, move.params.split_k)


def test_other_moves_run_their_own_tiles():
    for op in (MM, linear_op(), Op("matmul", {"trans_a": False, "trans_b": False, "dtype": "float16"})):
        for m in moves(op):
            if not (m.params.tma and m.params.precision == "tf32x3"):
                assert m.params.strided() is m.params and "faster there than" not in m.text


@pytest.mark.parametrize("move", [m for m in moves(MM) if m.params.tma and m.params.precision == "tf32x3"],
                         ids=lambda m: ident(m.params))
@pytest.mark.parametrize("sa, sb", [((40, 1536), (1536, 24)),  # few tiles, long K: split-K under a split_k move
                                    ((2, 33, 20), (2, 20, 17)),  # batched
                                    ((65, 33), (33, 17))])  # rows of 33 floats: not 16-byte aligned
def test_matmul_strided_launches_are_exact_at_the_first_exact_tiles(move, sa, sb, tmp_path):
    """Every strided launch (the one-pass kernel, or split-K's partial products) at the first exact move's tiles;
    in the interpreter each product launches it once (on a Hopper GPU the ones TMA takes launch it never). The
    first move's short-K path (its own tiles, test_matmul_short_k.py) is set aside: K = 20 here."""
    module = load(render(MM, mm_reference(False, False), move.params.but(short_k=False)), tmp_path)
    spy = Keywords("kc_matmul_kernel", *TILES)
    spy(module)
    torch.manual_seed(0)
    a, b = torch.randn(sa, device=DEVICE), torch.randn(sb, device=DEVICE)
    torch.testing.assert_close(module.ModelNew()(a, b), module.Model()(a, b), rtol=1e-4, atol=1e-4)
    assert all(seen == EXACT for seen in spy.seen) and len(spy.seen) == (1 if DEVICE == "cpu" else len(spy.seen))


@pytest.mark.parametrize("move", [m for m in moves(linear_op()) if m.params.tma and m.params.precision == "tf32x3"],
                         ids=lambda m: ident(m.params))
def test_linear_strided_launch_is_exact_at_the_first_exact_tiles(move, tmp_path):
    ref = reference("self.fc(x)", "self, k, n", "self.fc = nn.Linear(k, n)")
    module = load(render(linear_op(), ref, move.params), tmp_path)
    spy = Keywords("kc_linear_kernel", *TILES)
    spy(module)
    torch.manual_seed(0)
    model, new = module.Model(19, 37).to(DEVICE), module.ModelNew(19, 37).to(DEVICE)
    new.load_state_dict(model.state_dict())
    x = torch.randn(5, 19, device=DEVICE)  # 19 floats a row: not 16-byte aligned, so the strided kernel anywhere
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x), rtol=1e-4, atol=1e-4)
    assert spy.seen == [EXACT]
