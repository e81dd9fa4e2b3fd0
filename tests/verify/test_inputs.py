"""Inputs drawn from a secret seed: reproducible, varied by distribution, keeping what the problem needs."""

from __future__ import annotations

import types

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.verify.inputs import (DISTRIBUTIONS, NUDGE_ULPS, PERTURBATION, SPREAD, distributions_for, draw_inputs,
                                       fresh_seed, mutate_inputs, one_signed, perturbed, precision_rotation)
from tests.helpers import FIXTURES

CHANGING = [d for d in DISTRIBUTIONS if d != "natural"]


def _module(**extra):
    def get_inputs():
        return [torch.randn(40, 30),                       # both signs
                torch.rand(40, 30) + 0.1,                   # positive only (a log's input, say)
                -(torch.rand(17) + 0.1),                    # negative only
                torch.randint(0, 100, (40,)),               # integer: never transformed
                torch.randn(8, 8, dtype=torch.float16),
                7,                                          # a plain Python scalar
                torch.randn(6, 10).t()]                     # non-contiguous
    return types.SimpleNamespace(get_inputs=get_inputs, **extra)


def test_same_seed_same_inputs():
    m = _module()
    for distribution in DISTRIBUTIONS:
        a, b = draw_inputs(m, "cpu", 42, distribution), draw_inputs(m, "cpu", 42, distribution)
        for x, y in zip(a, b):
            assert torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y


def test_different_seed_different_inputs():
    m = _module()
    a, b = draw_inputs(m, "cpu", 1), draw_inputs(m, "cpu", 2)
    for i in (0, 1, 2, 3, 4, 6):
        assert not torch.equal(a[i], b[i]), f"input {i} did not change with the seed"


def test_drawing_does_not_disturb_the_global_rng():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    draw_inputs(_module(), "cpu", 99, "mixed_scale")
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_distribution_keeps_shape_dtype_and_non_floats(distribution):
    natural = draw_inputs(_module(), "cpu", 7)
    drawn = draw_inputs(_module(), "cpu", 7, distribution)
    assert len(drawn) == len(natural)
    for x, n in zip(drawn, natural):
        if isinstance(n, torch.Tensor):
            assert (x.shape, x.dtype, x.device) == (n.shape, n.dtype, n.device)
            assert torch.isfinite(x.float()).all()
    assert torch.equal(drawn[3], natural[3])  # integers unchanged
    assert drawn[5] == 7
    assert drawn[6].stride() == natural[6].stride() == (1, 10)  # the problem's layout is kept


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_one_signed_inputs_keep_their_sign(distribution):
    natural = draw_inputs(_module(), "cpu", 8)
    drawn = draw_inputs(_module(), "cpu", 8, distribution)
    assert (drawn[1] > 0).all(), "a positive-only input got a non-positive element"
    assert (drawn[2] < 0).all(), "a negative-only input got a non-negative element"
    assert torch.equal(torch.sign(drawn[1]), torch.sign(natural[1]))


@pytest.mark.parametrize("distribution", [d for d in DISTRIBUTIONS if d != "offset"])
def test_mixed_sign_inputs_keep_each_elements_sign(distribution):
    # Only `offset` shifts a tensor whose signs are free; every other transform keeps each sign.
    natural = draw_inputs(_module(), "cpu", 9)
    drawn = draw_inputs(_module(), "cpu", 9, distribution)
    for i in (0, 4, 6):
        assert torch.equal(torch.sign(drawn[i]), torch.sign(natural[i])), f"input {i}"


def test_offset_shifts_mixed_sign_inputs():
    natural = draw_inputs(_module(), "cpu", 10)
    shifted = draw_inputs(_module(), "cpu", 10, "offset")
    delta = shifted[0] - natural[0]
    assert delta.abs().min() > 0
    assert torch.allclose(delta, delta.flatten()[0].expand_as(delta), atol=1e-5)  # one shift for all


@pytest.mark.parametrize("distribution", CHANGING)
def test_non_natural_distributions_change_values(distribution):
    natural = draw_inputs(_module(), "cpu", 11)
    drawn = draw_inputs(_module(), "cpu", 11, distribution)
    for i in (0, 1, 2, 4, 6):
        assert not torch.equal(drawn[i], natural[i]), f"input {i} unchanged by {distribution}"


@pytest.mark.parametrize("distribution, low, high", [("small_scale", 1e-3, 10 ** -1.5),
                                                     ("large_scale", 10 ** 1.5, 1e3)])
def test_whole_tensor_scales(distribution, low, high):
    natural = draw_inputs(_module(), "cpu", 12)[1]
    factor = draw_inputs(_module(), "cpu", 12, distribution)[1] / natural
    assert torch.allclose(factor, factor.flatten()[0].expand_as(factor), rtol=1e-5)  # one factor
    assert low * (1 - 1e-5) <= factor.flatten()[0] <= high * (1 + 1e-5)


def test_mixed_scale_gives_every_element_its_own_factor():
    natural = draw_inputs(_module(), "cpu", 12)[1]
    factor = draw_inputs(_module(), "cpu", 12, "mixed_scale")[1] / natural
    assert factor.std() > 0.1 * factor.mean()
    assert factor.min() >= 0.01 * (1 - 1e-5) and factor.max() <= 100 * (1 + 1e-5)


def test_unknown_distribution():
    with pytest.raises(ValueError, match="unknown distribution 'gaussian'"):
        draw_inputs(_module(), "cpu", 1, "gaussian")


def test_distributions_for_honours_the_problem():
    assert distributions_for(_module()) == DISTRIBUTIONS
    assert distributions_for(_module(INPUT_DISTRIBUTIONS=["natural", "uniform"])) == ("natural", "uniform")
    assert distributions_for(_module(INPUT_DISTRIBUTIONS=[])) == ("natural",)
    with pytest.raises(ValueError, match=r"unknown distributions \['lognormal'\]"):
        distributions_for(_module(INPUT_DISTRIBUTIONS=["natural", "lognormal"]))
    problem = load_problem(FIXTURES / "relu_problem_uniform_only.py").load()
    assert distributions_for(problem) == ("uniform",)


# -- one-signed inputs: the trial that shows reduced precision, and the reference's rounding sampled ---------------

def test_spread_scales_every_magnitude_down_by_its_own_factor_keeping_signs_zeros_and_range():
    natural = draw_inputs(_module(), "cpu", 13)
    spread = draw_inputs(_module(), "cpu", 13, SPREAD)
    for i in (0, 1, 2, 4, 6):
        assert torch.equal(torch.sign(spread[i]), torch.sign(natural[i])), i
        factor = spread[i].double() / natural[i].double()
        assert factor.max() <= 1 + 1e-3 and factor.log10().std() > 0.3, i  # only down, each element its own way
    assert spread[1].double().div(natural[1].double()).min() < 1e-12  # fp32: down to 1e-16
    assert spread[4].double().div(natural[4].double()).min() > 10 ** -2.5  # fp16: half its range of magnitudes
    assert torch.equal(spread[3], natural[3]) and spread[5] == 7
    rand = types.SimpleNamespace(get_inputs=lambda: [torch.rand(300, 300) * (torch.rand(300, 300) > 0.2)])
    (x,) = draw_inputs(rand, "cpu", 2, SPREAD)
    (before,) = draw_inputs(rand, "cpu", 2)
    assert torch.equal(x == 0, before == 0) and x.min() >= 0 and x.max() < 1  # torch.rand's [0, 1), zeros kept
    # few large magnitudes: a factor above 10^-y for a share (y/16)^3 of the elements (1/8 above 10^-8)
    (x,) = draw_inputs(types.SimpleNamespace(get_inputs=lambda: [torch.ones(1 << 16)]), "cpu", 3, SPREAD)
    for y in (4.0, 8.0, 12.0):
        assert abs(float((x > 10 ** -y).double().mean()) - (y / 16) ** 3) < 0.01, y


def test_spread_takes_offsets_place_where_every_input_is_one_signed():
    rand = types.SimpleNamespace(get_inputs=lambda: [torch.rand(4, 5), -torch.rand(5, 3), torch.randint(-3, 3, (2,))])
    inputs = draw_inputs(rand, "cpu", 1)
    assert one_signed(inputs)
    assert precision_rotation(rand, distributions_for(rand), inputs) == (
        "natural", SPREAD, "mixed_scale", "uniform", "small_scale", "large_scale")
    mixed = _module()  # randn among its inputs
    assert not one_signed(draw_inputs(mixed, "cpu", 1))
    assert precision_rotation(mixed, DISTRIBUTIONS, draw_inputs(mixed, "cpu", 1)) == DISTRIBUTIONS
    assert not one_signed([2, torch.arange(3)])  # no floating input
    # a problem that names its distributions gets those: `spread` only where it names it
    named = types.SimpleNamespace(get_inputs=rand.get_inputs, INPUT_DISTRIBUTIONS=["natural", "offset"])
    assert precision_rotation(named, distributions_for(named), inputs) == ("natural", "offset")
    named.INPUT_DISTRIBUTIONS = ["natural", SPREAD]
    assert distributions_for(named) == ("natural", SPREAD)


def test_perturbed_inputs_are_copies_off_by_at_most_a_percent_with_signs_and_zeros_kept():
    x = torch.randn(100, 30)
    x[0, :5] = 0
    original, ints = x.clone(), torch.arange(5)
    near, same_ints, number = perturbed([x, ints, 3.0], torch.Generator().manual_seed(0))
    assert torch.equal(x, original) and same_ints is ints and number == 3.0 and near.dtype == x.dtype
    ratio = near[x != 0] / x[x != 0]
    assert (ratio - 1).abs().max() <= PERTURBATION * (1 + 1e-6) and (ratio != 1).float().mean() > 0.99
    assert (near[x == 0] == 0).all() and torch.equal(torch.sign(near), torch.sign(x))


def test_a_nudge_moves_each_element_by_a_few_units_of_its_own_roundoff():
    x = torch.randn(200, 30)
    for dtype in (torch.float32, torch.float16, torch.float64):
        t = x.to(dtype)
        (near,) = perturbed([t], torch.Generator().manual_seed(1), ulps=NUDGE_ULPS)
        ratio = (near.double() / t.double())
        bound = (NUDGE_ULPS + 1) * torch.finfo(dtype).eps  # the product rounded once more
        assert (ratio - 1).abs().max() <= bound and (ratio != 1).double().mean() > 0.5, dtype


def test_real_problem_inputs():
    module = load_problem("level1/cross_entropy_loss").load(small=True)
    logits, targets = draw_inputs(module, "cpu", 3, "uniform")
    assert logits.shape == (37, 101) and logits.dtype == torch.float32
    assert targets.dtype == torch.int64 and 0 <= targets.min() and targets.max() < 101
    assert torch.equal(targets, draw_inputs(module, "cpu", 3)[1])


def test_fresh_seeds_differ():
    seeds = {fresh_seed() for _ in range(20)}
    assert len(seeds) == 20 and all(0 <= s < 2 ** 62 for s in seeds)


def test_timed_changes_are_fully_fresh_on_about_a_quarter_of_calls_and_replay_exactly():
    import torch

    fresh_seen = partial_sizes = 0
    sizes = set()
    for seed in range(200):
        x = torch.randn(64, 96)
        before = x.clone()
        fresh = mutate_inputs([x], seed, "scale")
        changed = (x != before).sum().item()
        if fresh:
            fresh_seen += 1
            assert changed == x.numel()  # every element
        else:
            partial_sizes += 1
            sizes.add(changed)
            assert 0 < changed <= x.numel() // 2
        again = before.clone()
        mutate_inputs([again], seed, "scale")
        assert torch.equal(again, x)  # the supervisor rebuilds a timed call's inputs from its seeds
    assert 30 <= fresh_seen <= 75 and partial_sizes and len(sizes) > 3  # spans of several extents


def test_fresh_roll_changes_moves_every_row_of_a_one_signed_input():
    import torch

    from kernelcraft.verify.inputs import mutate_inputs

    seed = next(s for s in range(100) if __import__("random").Random(s).random() < 0.25)
    x = torch.rand(256, 8)
    before = x.clone()
    assert mutate_inputs([x], seed, "roll")
    assert (x != before).any(dim=1).float().mean() > 0.9
    assert torch.equal(x.sort(dim=0).values, before.sort(dim=0).values)  # the values themselves stay


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_a_drawn_layout_survives_every_distribution_and_the_timed_changes(distribution):
    """A problem that draws a gapped view (a head cut from a fused projection) or a transpose gets it back in
    memory of its own with the same strides; an expanded view (elements sharing memory) comes back contiguous."""
    base_seen = []

    def get_inputs():
        fused = torch.randn(2, 16, 96)
        base_seen.append(fused)
        return [fused[..., 32:64].view(2, 16, 4, 8).transpose(1, 2), torch.randn(6, 10).t(),
                torch.randn(1, 10).expand(4, 10)]

    drawn = draw_inputs(types.SimpleNamespace(get_inputs=get_inputs), "cpu", 3, distribution)
    assert [x.stride() for x in drawn[:2]] == [(1536, 8, 96, 1), (1, 10)]
    if distribution != "natural":  # changed in place: copies, never the problem's own tensor
        assert drawn[2].is_contiguous()
        assert not any(x.untyped_storage().data_ptr() == base_seen[-1].untyped_storage().data_ptr() for x in drawn)
    mutate_inputs(drawn[:2], 11, "scale")
    assert drawn[0].stride() == (1536, 8, 96, 1)
