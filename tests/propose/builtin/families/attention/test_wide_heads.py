"""The attention family's path for wide heads (unfused.py: scores GEMM, row softmax, p @ v GEMM), taken at run time
by every move's candidate: against torch on heads of 512 and 1024 (and Ev wide alone), ragged small L and S, causal
or not, fp32 and fp16, k passed transposed, a given scale; which path the bound picks; the batch cut into chunks."""

import pytest
import torch
import torch.nn.functional as F

from kernelcraft.propose.builtin.families.attention import unfused
from tests.propose.builtin.families.attention.test_attention import (KT_OP, attn_op, check_attention, kt_reference,
                                                                     one_hot_error, sdpa_reference, tolerance)
from tests.propose.builtin.kernel_check import DEVICE, Keywords, Launches, ident, load, moves, needs_relaxed, render

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# (q, k, v): E 512 (padded: 1024) with Ev != E, L < S and L > S; E 1024 with a narrow Ev; a narrow E with an Ev
# whose fp32 accumulator row is too wide; 4-D with a size-1 dim
WIDE = [((2, 7, 520), (2, 9, 520), (2, 9, 300)), ((1, 21, 1024), (1, 5, 1024), (1, 5, 13)),
        ((3, 11, 24), (3, 13, 24), (3, 13, 257)), ((1, 2, 5, 512), (1, 2, 37, 512), (1, 2, 37, 40))]
FLASH, SOFTMAX = "kc_attention_kernel", "kc_attention_softmax"


def launched(module, q, k, v, *init) -> tuple[torch.Tensor, list]:
    """The candidate's output and the names of the kernels it launched."""
    spy = Launches(FLASH, SOFTMAX)
    spy(module)
    return module.ModelNew(*init)(q, k, v), spy.seen


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("params", [m.params for m in moves(attn_op())], ids=ident)
def test_every_move_on_wide_heads(params, causal, tmp_path):
    check_attention(attn_op(causal), params, WIDE, tmp_path, init=(causal,))
    check_attention(attn_op(causal), params, WIDE[:2], tmp_path, dtype=torch.float16, init=(causal,))


@pytest.mark.parametrize("move", moves(KT_OP), ids=lambda m: ident(m.params))
def test_wide_heads_with_k_passed_transposed(move, tmp_path):
    """k handed over as k^T (..., E, S), causal, scale 0.25: the scores' GEMM reads it as it lies."""
    if needs_relaxed(move):
        pytest.skip("a relaxed-policy move (TF32): checked at its own tolerance elsewhere")
    module = load(render(KT_OP, kt_reference(), move.params), tmp_path)
    for qs, ks, vs in WIDE[:2]:
        torch.manual_seed(0)
        q, k, v = (torch.randn(s, device=DEVICE) for s in (qs, ks, vs))
        got, seen = launched(module, q, k.transpose(-2, -1).contiguous(), v)
        assert SOFTMAX in seen and FLASH not in seen
        torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.25),
                                   **tolerance(torch.float32))


def test_a_scale_read_from_the_module_and_a_literal_one(tmp_path):
    params = moves(attn_op())[4].params  # the move that folds the scale into q: the wide path scales the scores
    check_attention(attn_op(True, 0.3, "scale"), params, WIDE[:2], tmp_path, init=(True, 0.3),
                    ref_src=sdpa_reference(", scale=self.scale"))
    check_attention(attn_op(False, -0.7), params, WIDE[:2], tmp_path, ref_src=sdpa_reference(", scale=-0.7"))


@pytest.mark.parametrize("scale", [-0.7, 0.0])
def test_a_negative_and_a_zero_scale_on_wide_heads(scale, tmp_path):
    check_attention(attn_op(True, scale), moves(attn_op())[0].params, WIDE[:2], tmp_path, init=(True,),
                    ref_src=sdpa_reference(f", scale={scale}"))


@pytest.mark.parametrize("fp64", [False, True], ids=["fp32", "fp64"])
def test_large_scores_weigh_the_top_key_exactly_on_wide_heads(fp64, tmp_path):
    """Level 1's 97 on an H200 (1024-wide heads) was off by 1.4e-3 of its rms on average at 30x to 1000x inputs,
    with fp32 or fp64 products alike: the softmax's scaled score met the max in an FMA."""
    module = load(render(attn_op(), sdpa_reference(), {}), tmp_path)
    module.kc_fp64_gpu = lambda t: fp64
    err, own = one_hot_error(module, ((2, 2, 64, 1024), (2, 2, 96, 1024), (2, 2, 96, 1024)), (541.0, 32.0, 55.0))
    assert err < 4 * own + 1e-7, (err, own)


@pytest.mark.parametrize("dtype, e, ev, wide", [
    (torch.float32, 128, 128, False), (torch.float32, 129, 16, True), (torch.float32, 16, 256, False),
    (torch.float32, 16, 257, True), (torch.float16, 256, 256, False), (torch.float16, 257, 8, True),
    (torch.float16, 8, 257, True)], ids=str)
def test_the_bound_picks_the_path(dtype, e, ev, wide, tmp_path):
    """Padded query rows over 512 bytes or fp32 accumulator rows over 1024 take the unfused path, others the fused
    kernel; both right."""
    module = load(render(attn_op(), sdpa_reference(), {}), tmp_path)
    torch.manual_seed(0)
    q, k, v = (torch.randn(s, device=DEVICE).to(dtype) for s in ((1, 5, e), (1, 6, e), (1, 6, ev)))
    got, seen = launched(module, q, k, v)
    assert seen == ([SOFTMAX] if wide else [FLASH])
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float()).to(dtype)
    torch.testing.assert_close(got, want, **tolerance(dtype))


def test_no_keys_strided_views_and_a_batch_in_chunks(tmp_path, monkeypatch):
    """S == 0 gives zeros; (B, H, L, E) views are read as given; a batch past the GEMMs' grid limit is cut into
    chunks (the limit lowered to 2 here: 3 chunks of 5 batch·heads)."""
    monkeypatch.setattr(unfused, "MAX_BATCH", 2)
    module = load(render(attn_op(True), sdpa_reference(), {}), tmp_path)
    module.kc_tma_gpu = lambda t: False  # the strided GEMMs' path, as off a Hopper GPU (it alone is cut in chunks)
    q, k, v = torch.randn(3, 600, device=DEVICE), torch.randn(0, 600, device=DEVICE), torch.randn(0, 7, device=DEVICE)
    torch.testing.assert_close(module.ModelNew(True)(q, k, v), torch.zeros(3, 7, device=DEVICE))
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, n, 5, 300, device=DEVICE).transpose(1, 2) for n in (9, 11, 11))  # (1, 5, n, 300)
    got, seen = launched(module, q, k, v, True)
    assert seen == [SOFTMAX] * 3
    torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v, is_causal=True),
                               **tolerance(torch.float32))


TMA_KERNELS = ("kc_matmul_tma_kernel_qk", "kc_matmul_tma_kernel_pv", "kc_attention_gemm", "kc_attention_scores_gemm")


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("params", [m.params for m in moves(attn_op()) if not m.params.relaxed], ids=ident)
def test_wide_heads_through_tma_as_on_a_hopper_gpu(params, causal, tmp_path):
    """On a Hopper GPU fp32 wide heads of a 3xTF32 move take the GEMM family's TMA kernel for both products, v
    copied K-major once; an exact move keeps the strided exact products (3xTF32's score errors, multiplied by the
    scores' size in the softmax, failed the strict policy at the mixed-scale trial). Here the candidate's
    kc_tma_gpu says yes, so they run in the interpreter, against torch at the strict tolerance; 16-bit heads keep
    the strided GEMMs."""
    module = load(render(attn_op(causal), sdpa_reference(), params), tmp_path)
    module.kc_tma_gpu = lambda t: True
    tma = params.precision == "tf32x3"
    for qs, ks, vs in WIDE:
        torch.manual_seed(0)
        q, k, v = (torch.randn(s, device=DEVICE) for s in (qs, ks, vs))
        spy = Launches(SOFTMAX, *(k for k in TMA_KERNELS if hasattr(module, k)))
        spy(module)
        got = module.ModelNew(causal)(q, k, v)
        want = (["kc_matmul_tma_kernel_qk", SOFTMAX, "kc_matmul_tma_kernel_pv"] if tma else
                ["kc_attention_scores_gemm" if causal else "kc_attention_gemm", SOFTMAX, "kc_attention_gemm"])
        assert spy.seen == want, (qs, spy.seen)
        torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                   **tolerance(torch.float32))
    q, k, v = (torch.randn(s, device=DEVICE).half() for s in WIDE[0])
    spy = Launches(SOFTMAX, *(k for k in TMA_KERNELS if hasattr(module, k)))
    spy(module)
    module.ModelNew(causal)(q, k, v)
    assert "kc_matmul_tma_kernel_qk" not in spy.seen and SOFTMAX in spy.seen


def mixed_scale_error(module, causal: bool, seed: int) -> float:
    """The candidate's largest error against float64 attention, relative to each output's size plus the outputs'
    RMS, on inputs whose every element has its own scale (0.01x to 100x, the verifier's mixed-scale trial): scores in
    the thousands, softmax rows dominated by one key."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(s, generator=g) * 10 ** (torch.rand(s, generator=g) * 4 - 2)
               for s in ((2, 19, 520), (2, 23, 520), (2, 23, 520)))
    q, k, v = (t.to(DEVICE) for t in (q, k, v))
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    got = module.ModelNew(causal)(q, k, v).double()
    return ((got - want).abs() / (want.abs() + want.pow(2).mean().sqrt())).max().item()


def test_large_scores_stay_fp32_accurate(tmp_path):
    """The exact move at the mixed-scale trial, against float64 attention."""
    err = mixed_scale_error(load(render(attn_op(True), sdpa_reference(), {}), tmp_path), True, 3)
    assert err < 1e-4, err


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_wide_heads_on_fp64_tensor_cores(causal, tmp_path):
    """wide_fp64 (the exact moves'): wide heads take their products on the fp64 tensor cores where kc_fp64_gpu says
    so (a Hopper GPU; patched here, the GEMMs run with PREC "fp64" in the interpreter on the CPU), fp32 inputs
    widened exactly: against float64 attention on the mixed-scale inputs the strict policy's trial draws (scores in
    the thousands, kept in fp32 between the kernels: about 8e-5 on an H100, where 3xTF32 products gave 5.6e-4 at
    KernelBench's sizes), and against torch on ragged heads; 16-bit inputs keep their own products, and so does a
    move without it."""
    params = moves(attn_op(causal))[0].params
    assert params.wide_fp64 and "fp64 tensor cores" in params.idea()
    assert "fp64" not in params.but(wide_fp64=False).idea() and "fp64" not in params.but(precision="tf32x3").idea()
    module = load(render(attn_op(causal), sdpa_reference(), params), tmp_path)
    module.kc_fp64_gpu = lambda t: True
    precs = Keywords("kc_attention_scores_gemm" if causal else "kc_attention_gemm", "PREC")
    precs(module)
    assert mixed_scale_error(module, causal, 5) < 1e-4
    for qs, ks, vs in WIDE:
        torch.manual_seed(0)
        q, k, v = (torch.randn(s, device=DEVICE) for s in (qs, ks, vs))
        want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.testing.assert_close(module.ModelNew(causal)(q, k, v), want, **tolerance(torch.float32))
    module.ModelNew(causal)(*(torch.randn(s, device=DEVICE).half() for s in WIDE[0]))
    per = 1 if causal else 2  # launches of the watched kernel a call: causal, the scores' only; else both products
    assert precs.seen == ["fp64"] * per * (1 + len(WIDE)) + ["ieee"] * per
    without = load(render(attn_op(causal), sdpa_reference(), params.but(wide_fp64=False)), tmp_path)
    without.kc_fp64_gpu = lambda t: True  # no such helper is rendered without it: this one is never called
    precs = Keywords("kc_attention_scores_gemm" if causal else "kc_attention_gemm", "PREC")
    precs(without)
    without.ModelNew(causal)(q, k, v)
    assert precs.seen == ["ieee"] * per
