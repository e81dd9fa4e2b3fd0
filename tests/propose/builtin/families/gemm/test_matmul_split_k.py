"""Split-K (the GEMM family's `split_k` moves): a plain 2-D product whose output tiles fill under half the SMs and
whose K divides into long enough parts is cut into contiguous parts of K, each part's partial tile written in fp32
and summed by a second kernel; batched products, K that does not divide, and products with steps or a triangle mask
take the one-pass kernels. Checked against torch on odd shapes, with a spy on which kernels ran."""

import pytest
import torch

from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.families.gemm.test_matmul import mm_reference
from tests.propose.builtin.kernel_check import DEVICE, Launches, ident, load, moves, render

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

MM = Op("matmul", {"trans_a": False, "trans_b": False})
SPLIT = [m.params for m in moves(MM) if m.params.split_k]
KERNELS = ("kc_matmul_kernel", "kc_split_k_sum_kernel", "kc_matmul_tma_kernel", "kc_gemv_kernel")


def run(params, op, sa, sb, tmp_path):
    module = load(render(op, mm_reference(False, False), params), tmp_path)
    spy = Launches(*(k for k in KERNELS if hasattr(module, k)))
    spy(module)
    torch.manual_seed(0)
    a, b = torch.randn(sa, device=DEVICE), torch.randn(sb, device=DEVICE)
    got, want = module.ModelNew()(a, b), module.Model()(a, b)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    return spy.seen


def test_the_first_move_and_the_first_exact_move_split_k():
    assert [m.params.split_k for m in moves(MM)].count(True) == 2 and moves(MM)[0].params.split_k
    assert all("splits K among programs" in m.text for m in moves(MM) if m.params.split_k)
    assert not any(m.params.split_k for m in moves(Op("linear", {"weight": "w", "bias": None})))


@pytest.mark.parametrize("params", SPLIT, ids=ident)
@pytest.mark.parametrize("sa, sb", [((40, 1536), (1536, 24)),  # one tile, K = 3 parts of 512
                                    ((2, 20, 1536), (1536, 7))])  # A's rows flattened over a 2-D B: one GEMM
def test_few_tiles_and_a_long_k_split(params, sa, sb, tmp_path):
    # the parts on the TMA kernel where the move says so (split_k_tma) and the GPU has TMA, else the strided kernel's
    hopper = DEVICE == "cuda" and torch.cuda.get_device_capability()[0] >= 9
    parts = "kc_matmul_tma_kernel" if params.split_k_tma and hopper else "kc_matmul_kernel"
    assert run(params, MM, sa, sb, tmp_path) == [parts, "kc_split_k_sum_kernel"]


@pytest.mark.parametrize("params", SPLIT, ids=ident)
@pytest.mark.parametrize("sa, sb", [((40, 1543), (1543, 24)),  # K prime: no exact parts
                                    ((40, 300), (300, 24)),  # K too short to split
                                    ((2, 40, 1536), (2, 1536, 24))])  # batched: one pass per matrix
def test_other_products_take_one_pass(params, sa, sb, tmp_path):
    assert "kc_split_k_sum_kernel" not in run(params, MM, sa, sb, tmp_path)


def test_steps_or_a_mask_keep_the_one_pass_kernel():
    """Partial sums must not go through a product's steps (relu of a part is not a part of the relu)."""
    for op in (Op("matmul", {"trans_a": False, "trans_b": False, "steps": [["relu"]]}),
               Op("matmul", {"trans_a": False, "trans_b": False, "mask": {"op": "triu", "diagonal": 0}})):
        assert "kc_k_splits" not in render(op, mm_reference(False, False), SPLIT[0])


def on_hopper(module) -> None:
    module.kc_tma_gpu = lambda t: True


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_split_k_on_the_tma_kernel_as_a_batch_of_k_chunks(ta, tb, tmp_path):
    """split_k_tma: on a Hopper GPU (the candidate's kc_tma_gpu patched; TMA runs in the interpreter on the CPU) the
    parts of K run as one batch of 3xTF32 products on the TMA kernel, each part's operands views of K chunks (a
    transposed operand's too), then the sum; off a Hopper GPU the strided kernel's exact parts, as before."""
    from kernelcraft.propose.builtin.families.gemm.tiles import MatmulTiles

    op = Op("matmul", {"trans_a": ta, "trans_b": tb})
    params = moves(op)[0].params  # the first move (measured faster on an H100: the family's docstring)
    assert params.split_k_tma
    assert "one batch of 3xTF32 products on the TMA kernel" in params.idea() and "for split-K" not in params.idea()
    module = load(render(op, mm_reference(ta, tb), params), tmp_path)
    on_hopper(module)
    spy = Launches(*(k for k in KERNELS if hasattr(module, k)))
    spy(module)
    torch.manual_seed(0)
    a, b = torch.randn(40, 1536, device=DEVICE), torch.randn(1536, 24, device=DEVICE)
    a, b = (a.T.contiguous() if ta else a), (b.T.contiguous() if tb else b)
    torch.testing.assert_close(module.ModelNew()(a, b), module.Model()(a, b), rtol=1e-4, atol=1e-4)
    assert spy.seen == ["kc_matmul_tma_kernel", "kc_split_k_sum_kernel"]
    with pytest.raises(ValueError, match="split_k_tma"):
        MatmulTiles(precision="ieee", split_k=True, split_k_tma=True)
