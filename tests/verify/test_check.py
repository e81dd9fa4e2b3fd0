"""Output form and value checks: what passes as the reference's output and what does not."""

from __future__ import annotations

import math
import types

import pytest
import torch

from kernelcraft.verify.check import check_form, compare, compare_exact, rounding, worst_rounding
from kernelcraft.verify.inputs import DISTRIBUTIONS, SPREAD, draw_inputs, perturbed
from kernelcraft.verify.policy import POLICIES, get_policy

STRICT, RELAXED = POLICIES["strict"], POLICIES["relaxed"]
CPU = torch.device("cpu")


@pytest.fixture
def ref():
    return torch.randn(64, 50, generator=torch.Generator().manual_seed(0))


# -- compare --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("policy", [STRICT, RELAXED])
def test_equal_tensors_pass(ref, policy):
    cmp = compare(ref.clone(), ref, policy)
    assert cmp.ok and cmp.max_rel_error == 0.0 and cmp.reason == ""


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_fails(ref, bad):
    out = ref.clone()
    out[3, 7] = bad
    cmp = compare(out, ref, RELAXED)
    assert not cmp.ok and cmp.reason == "non_finite" and math.isinf(cmp.max_rel_error)
    assert cmp.detail.startswith("1 NaN/Inf")


def test_nan_fails_even_where_the_reference_is_nan(ref):
    out, r = ref.clone(), ref.clone()
    out[0, 0] = r[0, 0] = float("nan")
    cmp = compare(out, r, RELAXED)
    assert not cmp.ok and cmp.reason == "non_finite"
    assert "the reference also has" in cmp.detail


@pytest.mark.parametrize("policy", [STRICT, RELAXED])
def test_zeros_fail_against_tiny_outputs(policy):
    tiny = 1e-6 * torch.randn(1000, generator=torch.Generator().manual_seed(1))
    cmp = compare(torch.zeros_like(tiny), tiny, policy)
    assert not cmp.ok and cmp.reason == "mismatch"
    assert cmp.max_rel_error > 0.5  # |r| / (|r| + rms) at the largest |r|


@pytest.mark.parametrize("policy", [STRICT, RELAXED])
def test_constant_fails(ref, policy):
    assert not compare(torch.full_like(ref, ref.mean().item()), ref, policy).ok


def test_error_is_relative_to_the_output_magnitude():
    r = torch.full((100,), 2.0)  # rms 2: error = |out - ref| / (|ref| + 2) = d / 4
    cmp = compare(r + 0.004, r, STRICT)
    assert cmp.max_rel_error == pytest.approx(1e-3, rel=1e-4)
    assert not cmp.ok and cmp.reason == "mismatch"
    assert "max relative error 0.001 > 0.0001 (strict)" in cmp.detail
    assert "100.00% of elements out of tolerance" in cmp.detail
    cmp = compare(r + 0.004, r, RELAXED)
    assert cmp.ok and cmp.max_rel_error == pytest.approx(1e-3, rel=1e-4)


def test_strict_and_relaxed_tolerances(ref):
    within_strict = ref * (1 + 2e-5)
    between = ref * (1 + 2e-3)
    beyond = ref * (1 + 5e-2)
    assert compare(within_strict, ref, STRICT).ok and compare(within_strict, ref, RELAXED).ok
    assert not compare(between, ref, STRICT).ok and compare(between, ref, RELAXED).ok
    assert not compare(beyond, ref, STRICT).ok and not compare(beyond, ref, RELAXED).ok


def test_detail_points_at_the_worst_element(ref):
    out = ref.clone()
    out[10, 20] += 1.0
    cmp = compare(out, ref, RELAXED)
    assert not cmp.ok
    assert "at index [10, 20]" in cmp.detail
    assert f"expected {ref[10, 20].item():.6g}" in cmp.detail


def test_half_precision_uses_the_half_tolerance():
    r = torch.full((10,), 2.0, dtype=torch.float16)
    out = r + 0.0156  # error ~ 0.0039 (fp16-rounded), inside 1e-2 under both policies
    assert compare(out.half(), r, STRICT).ok
    assert not compare((r + 0.125).half(), r, STRICT).ok  # 0.031 > 1e-2


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_integers_must_match_exactly(dtype):
    r = torch.arange(20).to(dtype) if dtype != torch.bool else torch.arange(20) % 3 == 0
    assert compare(r.clone(), r, STRICT).ok
    out = r.clone()
    out[5] = out[5] + 1 if dtype != torch.bool else not bool(out[5])
    cmp = compare(out, r, RELAXED)
    assert not cmp.ok and cmp.reason == "mismatch" and cmp.detail == "1 of 20 elements differ"


def test_empty_and_scalar_outputs():
    assert compare(torch.empty(0, 3), torch.empty(0, 3), STRICT).ok
    assert compare(torch.tensor(3.0), torch.tensor(3.0), STRICT).ok
    cmp = compare(torch.tensor(0.0), torch.tensor(3.0), RELAXED)
    assert not cmp.ok and "at index []" in cmp.detail


def test_get_policy():
    assert get_policy("strict") is STRICT
    assert STRICT.tolerance(torch.float32) == 1e-4 and STRICT.tolerance(torch.bfloat16) == 1e-2
    assert RELAXED.tolerance(torch.float32) == 1e-2 and RELAXED.allow_tf32 and not STRICT.allow_tf32
    with pytest.raises(ValueError, match="unknown policy 'loose'"):
        get_policy("loose")


# -- check_form ----------------------------------------------------------------------------------------

def test_right_form_passes(ref):
    assert check_form([ref.clone()], [ref], CPU) is None
    # A dense tensor in another dim order (a transposed contiguous buffer) is a fine output.
    assert check_form([ref.t().contiguous().t()], [ref], CPU) is None
    assert check_form([torch.zeros(3, 1, 4)[:, :, :]], [torch.zeros(3, 1, 4)], CPU) is None


def test_wrong_count(ref):
    assert check_form([ref, ref], [ref], CPU)[0] == "output_count"
    assert check_form([], [ref], CPU)[0] == "output_count"


def test_wrong_shape(ref):
    reason, detail = check_form([ref.reshape(-1)], [ref], CPU)
    assert reason == "output_shape"
    assert detail == "output 0 has shape (3200,), expected (64, 50)"


def test_wrong_dtype(ref):
    reason, detail = check_form([ref.double()], [ref], CPU)
    assert reason == "output_dtype" and "torch.float64" in detail


@pytest.mark.parametrize("value", [None, 3.0, [1.0, 2.0], "tensor"])
def test_not_a_tensor(ref, value):
    assert check_form([value], [ref], CPU)[0] == "output_not_tensor"


def test_numpy_array_is_not_a_tensor(ref):
    assert check_form([ref.numpy()], [ref], CPU)[0] == "output_not_tensor"


class _Sneaky(torch.Tensor):
    pass


def test_tensor_subclass_is_refused(ref):
    out = ref.clone().as_subclass(_Sneaky)
    reason, detail = check_form([out], [ref], CPU)
    assert reason == "output_not_tensor" and "_Sneaky" in detail


def test_parameter_is_refused(ref):
    assert check_form([torch.nn.Parameter(ref.clone())], [ref], CPU)[0] == "output_not_tensor"


def test_overlapping_strides_are_refused():
    ref = torch.zeros(64, 50)
    out = torch.randn(1, 50).expand(64, 50)  # 64 rows, one row of memory
    reason, detail = check_form([out], [ref], CPU)
    assert reason == "output_layout" and "(0, 1)" in detail


def test_gapped_strides_are_refused():
    ref = torch.zeros(64, 50)
    out = torch.randn(64, 100)[:, ::2]
    assert check_form([out], [ref], CPU)[0] == "output_layout"


def test_sparse_and_meta_are_refused(ref):
    assert check_form([ref.to_sparse()], [ref], CPU)[0] == "output_layout"
    assert check_form([torch.empty(64, 50, device="meta")], [ref], CPU)[0] == "output_layout"


def test_first_wrong_output_is_named():
    a, b = torch.zeros(2), torch.zeros(3)
    reason, detail = check_form([a, b.half()], [a, b], CPU)
    assert reason == "output_dtype" and detail.startswith("output 1 ")


# -- float64 as the yardstick where torch's own output is rounding noise ----------------------------------

def _cancelling(n: int = 4096, rows: int = 64):
    """Row sums of values that cancel: the exact answer is tiny, fp32's is rounding noise."""
    g = torch.Generator().manual_seed(0)
    half = torch.randn(rows, n // 2, generator=g, dtype=torch.float64) * 1e3
    x = torch.cat([half, -half.flip(1)], dim=1)[:, torch.randperm(n, generator=g)]
    x = x + torch.randn(rows, n, generator=g, dtype=torch.float64) * 1e-6
    exact = x.sum(dim=1)
    ours = x.float().sum(dim=1)  # torch's own fp32
    other = x.float().flip(1).cumsum(dim=1)[:, -1]  # an honest other order of summation
    return x, exact, ours, other


def _sampled(x: torch.Tensor, exact: torch.Tensor, runs: int = STRICT.rounding_samples) -> torch.Tensor:
    """The reference's rounding at every row, sampled as judge.Case.rounding_noise does: the largest error of torch's
    fp32 sum and of `runs` more, each against float64 on the inputs perturbed by up to 1%."""
    noise = rounding(x.float().sum(dim=1), exact)
    g = torch.Generator().manual_seed(1)
    for _ in range(runs):
        (near,) = perturbed([x.float()], g)
        rounding(near.sum(dim=1), near.double().sum(dim=1), into=noise)
    return noise


def test_compare_exact_passes_an_honest_other_order_that_fp32_comparison_fails():
    x, exact, ours, other = _cancelling()
    assert not compare(other, ours, STRICT).ok  # two honest fp32 orders disagree far past 1e-4
    # torch's own error is one sample of its rounding, exactly zero on a row whose pairs cancel in its order; there the
    # exact value is itself below the output's typical rounding, which stands in for the missing sample; the largest
    # of nine runs passes it too
    assert compare_exact(other, ours, exact, STRICT).ok
    verdict = compare_exact(other, ours, exact, STRICT, _sampled(x, exact), 1 + STRICT.rounding_samples)
    assert verdict.ok and verdict.max_rel_error <= STRICT.fp32
    assert "torch's own" in verdict.detail and "the largest error of 9 fp32 runs" in verdict.detail


def test_compare_exact_fails_what_is_wrong_by_more_than_rounding():
    x, exact, ours, other = _cancelling()
    noise = _sampled(x, exact)
    for wrong in (other + 1.0, torch.zeros_like(ours) + 50.0):  # off by far more than torch's own error
        assert not compare_exact(wrong, ours, exact, STRICT).ok
        assert not compare_exact(wrong, ours, exact, STRICT, noise, 9).ok
    well_conditioned = torch.randn(256, dtype=torch.float64)
    # where torch is exact to fp32 precision the allowance is ulps: a 1e-3 error still fails strict
    assert not compare_exact(well_conditioned.float() * (1 + 1e-3), well_conditioned.float(), well_conditioned,
                             STRICT).ok


def test_rounding_is_the_largest_error_of_the_runs_and_an_unstable_run_counts_as_infinite():
    exact = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    noise = rounding(torch.tensor([1.5, 2.0, 3.0]), exact)
    assert noise.dtype == torch.float32 and noise.tolist() == [0.5, 0.0, 0.0]
    assert rounding(torch.tensor([1.25, 2.25, float("nan")]), exact, into=noise) is noise
    assert noise.tolist() == [0.5, 0.25, math.inf]


def _one_pass_variances(rows: int = 64, n: int = 2048):
    """Row variances by mean(x²) − mean(x)² of nearly constant rows (offsets 1 to 1e4, unit noise): in fp32 the
    formula cancels, so torch's own result is rounding noise of several units where the offset is large and exact
    to a few ulps where it is small (tests/adversarial/problems/nearly_constant_rows.py)."""
    g = torch.Generator().manual_seed(3)
    x = 10 ** (4 * torch.rand(rows, 1, generator=g)) + torch.randn(rows, n, generator=g)

    def variance(t):
        return (t * t).mean(dim=1) - t.mean(dim=1) ** 2

    noise = rounding(variance(x), variance(x.double()))
    for _ in range(STRICT.rounding_samples):  # as judge.Case.rounding_noise samples the reference's rounding
        (near,) = perturbed([x], g)
        rounding(variance(near), variance(near.double()), into=noise)
    return x, variance(x.double()), variance(x), noise


def test_an_estimate_hides_in_an_allowance_over_the_whole_output_not_in_one_per_element():
    x, exact, ours, noise = _one_pass_variances()
    estimate = x[:, ::32].var(dim=1)  # from 64 of each row's elements: ~20% off
    assert not compare(estimate, ours, STRICT).ok
    # ten times torch's worst error over the whole output (several units) took any answer near the variances of ~1
    assert compare_exact(estimate, ours, exact, STRICT, worst_rounding(ours, exact)).ok
    # per element it fails where torch is exact, whether torch's error is taken once or sampled over nine runs
    for verdict in (compare_exact(estimate, ours, exact, STRICT),
                    compare_exact(estimate, ours, exact, STRICT, noise, 9)):
        assert not verdict.ok and verdict.max_rel_error > 0.01 and verdict.reason == "mismatch"
    # the same formula in fp32 with the sums in another order is rounding noise like torch's: it passes
    parts, squares = x.view(64, 16, -1).sum(dim=2), (x * x).view(64, 16, -1).sum(dim=2)
    other = squares.flip(1).cumsum(dim=1)[:, -1] / 2048 - (parts.flip(1).cumsum(dim=1)[:, -1] / 2048) ** 2
    assert not compare(other, ours, STRICT).ok
    assert compare_exact(other, ours, exact, STRICT, noise, 9).ok


def test_each_element_is_judged_against_itself_not_against_the_outputs_rms():
    exact = torch.cat([torch.full((10,), 100.0), torch.ones(1000)]).double()  # rms ~10
    ours = exact.float()
    off = ours.clone()
    off[10:] *= 1 + 5e-4  # 5e-4 of each small element: 5e-5 of |ref| + rms
    assert compare(off, ours, STRICT).ok
    verdict = compare_exact(off, ours, exact, STRICT)
    assert not verdict.ok and "at index [10]" in verdict.detail and verdict.max_rel_error > STRICT.fp32
    assert compare_exact(ours * (1 + 5e-5), ours, exact, STRICT).ok  # within 1e-4 of every element
    # far below the rms an element is held to the floor (256 ulps of the rms), not to itself: a flushed subnormal
    exact[500] = 1e-40
    ours = exact.float()
    flushed = ours.clone()
    flushed[500] = 0.0
    assert compare_exact(flushed, ours, exact, STRICT).ok
    flushed[500] = 1e-3  # 1e-4 of the rms: past the floor
    assert not compare_exact(flushed, ours, exact, STRICT).ok


def _tf32(t: torch.Tensor) -> torch.Tensor:
    """fp32 values rounded (to nearest even) to TF32's 10 mantissa bits."""
    bits = t.view(torch.int32)
    return ((bits + 0xFFF + ((bits >> 13) & 1)) & ~0x1FFF).view(torch.float32)


def _rand_matmul(distribution: str, k: int, seed: int, m: int = 16):
    module = types.SimpleNamespace(get_inputs=lambda: [torch.rand(m, k), torch.rand(k, m)])
    a, b = draw_inputs(module, "cpu", seed, distribution)
    return a, b, a @ b, a.double() @ b.double()


def test_reduced_precision_on_one_signed_inputs_passes_against_torch_and_fails_per_element_on_spread_ones():
    # bf16 operands, K = 2^17: within 1e-4 of the output's magnitude against torch's fp32 output on every
    # distribution of the default rotation; on spread magnitudes ~1e-4 to 1e-3 of most elements
    for distribution in DISTRIBUTIONS:
        a, b, ours, _ = _rand_matmul(distribution, 1 << 17, 5, m=8)
        assert compare(a.bfloat16().float() @ b.bfloat16().float(), ours, STRICT).ok, distribution
    a, b, ours, exact = _rand_matmul(SPREAD, 1 << 17, 5, m=8)
    assert not compare_exact(a.bfloat16().float() @ b.bfloat16().float(), ours, exact, STRICT).ok
    # TF32 operands, K = 4096: the same, on the spread trial; and fp32 computed in another order passes
    a, b, ours, exact = _rand_matmul(SPREAD, 4096, 5)
    assert not compare_exact(_tf32(a) @ _tf32(b), ours, exact, STRICT).ok
    chunked = sum(a[:, i:i + 512] @ b[i:i + 512] for i in range(0, 4096, 512))
    assert compare_exact(chunked, ours, exact, STRICT).ok
    # bf16 at K = 4096 is off by more than 1e-4 of some elements even on natural inputs: caught element by element
    a, b, ours, exact = _rand_matmul("natural", 4096, 1234)
    bf16 = a.bfloat16().float() @ b.bfloat16().float()
    assert compare(bf16, ours, STRICT).ok and not compare_exact(bf16, ours, exact, STRICT).ok


def test_the_spread_trial_shows_bf16_operands_by_a_wide_margin_on_every_draw():
    """Few terms carry each sum, at any K: bf16 operands are off by 5x strict's tolerance or more on every draw (with
    a uniform exponent ~K/512 terms shared each sum, and about one draw in 30 at K = 2^17 passed)."""
    for k in (1 << 12, 1 << 17):
        for seed in range(6):
            a, b, ours, exact = _rand_matmul(SPREAD, k, seed, m=8)
            error = compare_exact(a.bfloat16().float() @ b.bfloat16().float(), ours, exact, STRICT).max_rel_error
            assert error > 5 * STRICT.fp32, (k, seed, error)


# -- outputs compared a slice at a time ----------------------------------------------------------------------

@pytest.fixture
def small_slices(monkeypatch):
    """Slices of 64 elements, so a small tensor takes the path a multi-GB output takes."""
    from kernelcraft.verify import memory

    monkeypatch.setattr(memory, "SLICE", 64)


def test_sliced_comparison_matches_the_whole(ref, small_slices):
    out = ref.clone()
    out[40, 3] += 0.5  # in a later slice
    out[2, 1] += 0.25  # a smaller error in an earlier one
    cmp = compare(out, ref, RELAXED)
    assert not cmp.ok and "at index [40, 3]" in cmp.detail
    rms = ref.pow(2).mean().sqrt()
    assert cmp.max_rel_error == pytest.approx((0.5 / (ref[40, 3].abs() + rms)).item(), rel=1e-5)
    assert "0.06% of elements out of tolerance" in cmp.detail  # 2 of 3200
    assert compare(ref.clone(), ref, STRICT).ok


def test_sliced_ties_point_at_the_first_occurrence(small_slices):
    r = torch.ones(640)
    out = r.clone()
    out[[100, 500]] = 3.0  # the same error in two slices
    cmp = compare(out, r, RELAXED)
    assert not cmp.ok and "at index [100]" in cmp.detail


def test_sliced_non_finite_and_integers(small_slices):
    r = torch.randn(1000, generator=torch.Generator().manual_seed(2))
    out = r.clone()
    out[[10, 900]] = float("nan")
    cmp = compare(out, r, STRICT)
    assert cmp.reason == "non_finite" and cmp.detail.startswith("2 NaN/Inf elements")
    ints = torch.arange(1000)
    wrong = ints.clone()
    wrong[[5, 700, 999]] += 1
    assert compare(wrong, ints, STRICT).detail == "3 of 1000 elements differ"


def test_a_finite_output_against_an_infinite_reference_fails(ref):
    r = ref.clone()
    r[1, 1] = float("inf")  # the error there is inf / inf: NaN, which must never read as a pass
    cmp = compare(ref.clone(), r, RELAXED)
    assert not cmp.ok and math.isinf(cmp.max_rel_error)
