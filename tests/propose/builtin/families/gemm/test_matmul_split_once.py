"""The matmul's first move on operands split once: where M N >= SPLIT_ONCE_MIN (M + N) on a Hopper GPU, each fp32
operand is split into its TF32 hi and lo parts by kc_tf32_split (rows TMA reads, any layout, batches) and the
persistent kernel sums three TF32 products per K step, folding the tensor cores' sums every SPLIT_CHUNK steps;
smaller products keep the in-loop 3xTF32 TMA kernel. In the interpreter (kc_tma_gpu made to say yes, as in
test_matmul_tma.py) the TF32 products are exact, so these check the split, the layouts, the folds and the guard on
non-finite inputs; the `gpu` tests check the accuracy the tensor cores give, against fp64."""

import pytest
import torch

from kernelcraft.propose.builtin.families.gemm.tiles import SPLIT_CHUNK, SPLIT_ONCE_MIN, SPLIT_TILES
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.families.gemm.test_matmul import mm_reference
from tests.propose.builtin.families.gemm.test_matmul_tma import KERNELS, on_hopper
from tests.propose.builtin.kernel_check import DEVICE, Launches, load, moves, render

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SPLIT = ("kc_matmul_split_kernel", "kc_tf32_split_kernel")
FIRST = moves(Op("matmul", {"trans_a": False, "trans_b": False}))[0].params
SPLITTING = FIRST.but(short_k=False)  # its short-K path set aside: the products below have K <= SHORT_K
EDGE = 2 * SPLIT_ONCE_MIN  # M = N = EDGE: M N / (M + N) = SPLIT_ONCE_MIN, the smallest square product split once


def module_for(ta: bool, tb: bool, tmp_path, op=None, ref=None, hopper=True):
    op = op or Op("matmul", {"trans_a": ta, "trans_b": tb})
    module = load(render(op, ref or mm_reference(ta, tb), SPLITTING), tmp_path)
    if hopper:
        on_hopper(module)
    return module


def check(module, ta, tb, sa, sb, *, fill=None):
    """ModelNew against Model on op(A) of shape sa, op(B) of shape sb; returns the kernels launched."""
    spy = Launches(*(k for k in KERNELS + SPLIT if hasattr(module, k)))
    spy(module)
    torch.manual_seed(0)
    a, b = torch.randn(sa, device=DEVICE), torch.randn(sb, device=DEVICE)
    if fill:
        fill(a, b)
    a, b = (a.transpose(-2, -1).contiguous() if ta else a), (b.transpose(-2, -1).contiguous() if tb else b)
    got, want = module.ModelNew()(a, b), module.Model()(a, b)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, equal_nan=True, msg=lambda m: f"{sa}@{sb}: {m}")
    seen = spy.seen
    for name in spy.names:  # unwrap for the next case
        setattr(module, name, getattr(module, name).kernel)
    return seen


def test_the_first_move_splits_once():
    assert FIRST.split_once and FIRST.tma and FIRST.precision == "tf32x3" and FIRST.gemv and FIRST.split_k
    assert (FIRST.BLOCK_M, FIRST.BLOCK_N, FIRST.BLOCK_K, FIRST.num_warps, FIRST.num_stages) == SPLIT_TILES
    assert f"M N >= {SPLIT_ONCE_MIN} (M + N)" in FIRST.idea()


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_every_layout_splits_once_where_large_enough(ta, tb, tmp_path):
    """K = 19 (rows not 16-byte aligned: the parts' rows padded), N one past EDGE (C's rows unaligned); one less
    row than EDGE on both sides keeps the in-loop split."""
    module = module_for(ta, tb, tmp_path)
    seen = check(module, ta, tb, (EDGE, 19), (19, EDGE + 1))
    assert set(seen) == set(SPLIT) and "kc_tma_rows_kernel" not in seen, seen
    seen = check(module, ta, tb, (EDGE - 1, 24), (24, EDGE - 1))
    assert "kc_matmul_tma_kernel" in seen and not set(SPLIT) & set(seen), seen


def direct(module, sa, sb):
    """kc_matmul_split on A of shape sa and B of sb, called directly (the forward's size rule aside: small products
    keep the interpreter quick), against torch."""
    spy = Launches(*SPLIT)
    spy(module)
    torch.manual_seed(0)
    a, b = torch.randn(sa, device=DEVICE), torch.randn(sb, device=DEVICE)
    want = torch.matmul(a, b)
    c = torch.empty(want.shape, device=DEVICE)
    module.kc_matmul_split(a, b, c)
    torch.testing.assert_close(c, want, rtol=1e-4, atol=1e-4, msg=lambda m: f"{sa}@{sb}: {m}")
    assert set(spy.seen) == set(SPLIT), spy.seen
    for name in spy.names:
        setattr(module, name, getattr(module, name).kernel)


def test_batches_and_shared_operands(tmp_path):
    module = module_for(False, False, tmp_path)
    for sa, sb in (((2, 130, 12), (2, 12, 70)), ((130, 12), (2, 12, 70)), ((2, 130, 12), (1, 12, 70))):
        direct(module, sa, sb)


def test_the_folds_of_a_long_k(tmp_path):
    """K over SPLIT_CHUNK steps, not a multiple of them: folds inside the loop and after it."""
    k = SPLIT_CHUNK * FIRST.BLOCK_K + 45
    direct(module_for(False, False, tmp_path), (70, k), (k, 45))


def test_infinities_and_nans_as_torch(tmp_path):
    """An infinite hi times a zero or opposite lo must not turn the infinity into NaN."""
    def fill(a, b):
        a[3, 3], a[5, :] = float("inf"), 1.0  # row 5 exact in TF32: its lo is zero
        b[3, :], b[7, 9] = 1.5, float("-inf")
        a[9, 2] = float("nan")

    module = module_for(False, False, tmp_path)
    assert set(check(module, False, False, (EDGE, 20), (20, EDGE), fill=fill)) == set(SPLIT)


def test_a_triangle_and_steps_split_once(tmp_path):
    op = Op("matmul", {"trans_a": False, "trans_b": False, "steps": [["relu"]],
                       "mask": {"op": "tril", "diagonal": -1}})
    ref = mm_reference(False, False).replace("return torch.matmul(a, b)",
                                             "return torch.tril(torch.relu(torch.matmul(a, b)), -1)")
    module = module_for(False, False, tmp_path, op=op, ref=ref)
    assert set(check(module, False, False, (EDGE, 20), (20, EDGE))) == set(SPLIT)


def test_the_split_helper(tmp_path):
    """kc_tf32_split: hi and lo with zero low 13 bits, hi + lo within 2^-21 of x, non-finite x in hi with a zero lo,
    any view read through its strides into rows TMA reads."""
    module = module_for(False, False, tmp_path)
    torch.manual_seed(0)
    with torch.device(DEVICE):
        x = torch.randn(3, 67, 61).mT * 1e3
    x[0, 0, :4] = torch.tensor([float("inf"), float("-inf"), float("nan"), 3.4028234e38])
    hi, lo = module.kc_tf32_split(x)
    assert hi.shape == lo.shape == x.shape and module.kc_tma_reads(hi) and module.kc_tma_reads(lo)
    for part in (hi, lo):
        assert ((part.contiguous().view(torch.int32) & 0x1FFF) == 0).all()
    finite = torch.isfinite(x)
    assert torch.equal(hi[~finite].nan_to_num(), x[~finite].nan_to_num()) and (lo[~finite] == 0).all()
    err = (hi.double() + lo.double() - x.double())[finite].abs() / x.double()[finite].abs()  # fp64: hi + lo of
    # the largest float may round past it in fp32
    assert err.max() <= 2.0 ** -21


def test_off_hopper_the_strided_kernel(tmp_path):
    if DEVICE == "cuda" and torch.cuda.get_device_capability()[0] >= 9:
        pytest.skip("a Hopper GPU takes TMA")
    module = module_for(False, False, tmp_path, hopper=False)
    assert check(module, False, False, (EDGE, 8), (8, EDGE)) == ["kc_matmul_kernel"]


# (A shape, B shape, the largest error allowed relative to max |C| against fp64): square, a long K folded 64
# times (left to the tensor cores it measured 1.5e-4 at K = 65536), batched
GPU_CASES = {"square": ((2048, 2049), (2049, 2050), 5e-6), "long_k": ((2048, 32768), (32768, 2048), 5e-6),
             "batched": ((3, 1030, 515), (3, 515, 1100), 5e-6)}


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES)
def test_gpu_split_once(case, tmp_path):
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("the split kernel is fed by TMA: Hopper")
    sa, sb, bound = GPU_CASES[case]
    module = module_for(False, False, tmp_path, hopper=False)
    spy = Launches(*(k for k in KERNELS + SPLIT if hasattr(module, k)))
    spy(module)
    torch.manual_seed(0)
    a, b = torch.randn(sa, device="cuda"), torch.randn(sb, device="cuda")
    got = module.ModelNew()(a, b).double()
    want = torch.matmul(a.double(), b.double())
    assert (got - want).abs().max().item() <= bound * want.abs().max().item()
    assert set(spy.seen) == set(SPLIT), spy.seen
