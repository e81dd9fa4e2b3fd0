"""The suite screen: every problem, at SMALL_SIZES on the CPU, must be a problem a wrong kernel fails.

For each problem: the reference is finite, not (nearly) constant, depends on its inputs, and an
all-zeros or constant answer fails the comparison under every policy. At full size (meta device)
its cost is positive.
"""

from __future__ import annotations

import pytest
import torch

from kernelcraft.problems import load_problem, suite_names
from kernelcraft.problems.cost import compute_cost
from kernelcraft.verify.check import compare
from kernelcraft.verify.inputs import distributions_for, draw_inputs
from kernelcraft.verify.policy import POLICIES

NAMES = suite_names()


def _outputs(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _reference(name: str):
    module = load_problem(name).load(small=True)
    torch.manual_seed(1234)
    model = module.Model(*module.get_init_inputs()).eval()
    return module, model


def _run(module, model, seed: int, distribution: str = "natural") -> list[torch.Tensor]:
    with torch.no_grad():
        return _outputs(model(*draw_inputs(module, "cpu", seed, distribution)))


@pytest.fixture(scope="module")
def screened():
    """name -> (module, outputs for seed 11, outputs for seed 12)."""
    cache = {}

    def get(name):
        if name not in cache:
            module, model = _reference(name)
            cache[name] = module, _run(module, model, 11), _run(module, model, 12)
        return cache[name]
    return get


@pytest.mark.parametrize("name", NAMES)
def test_reference_is_finite(name, screened):
    _, outs, _ = screened(name)
    assert outs, "the reference returned no tensors"
    for i, out in enumerate(outs):
        assert isinstance(out, torch.Tensor), f"output {i} is a {type(out).__name__}"
        if out.is_floating_point():
            assert torch.isfinite(out).all(), f"output {i} has NaN/Inf"


@pytest.mark.parametrize("name", NAMES)
def test_reference_is_not_near_constant(name, screened):
    _, outs, _ = screened(name)
    for i, out in enumerate(outs):
        if out.numel() > 1:
            x = out.double()
            assert x.std() > 1e-3 * x.abs().mean(), f"output {i} is nearly constant"


@pytest.mark.parametrize("name", NAMES)
def test_reference_depends_on_its_inputs(name, screened):
    _, a, b = screened(name)
    for i, (x, y) in enumerate(zip(a, b)):
        x, y = x.double(), y.double()
        rel = ((x - y).abs().max() / y.abs().max().clamp_min(1e-30)).item()
        assert rel > 1e-3, f"output {i} barely changes between seeds (relative {rel:.2e})"


def _constant_like(ref: torch.Tensor) -> torch.Tensor:
    mean = ref.double().mean().item()
    if ref.is_floating_point():
        return torch.full_like(ref, mean)
    return torch.full_like(ref, round(mean))


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("name", NAMES)
def test_zeros_never_pass(name, policy, screened):
    _, outs, _ = screened(name)
    for i, ref in enumerate(outs):
        cmp = compare(torch.zeros_like(ref), ref, POLICIES[policy])
        assert not cmp.ok, f"an all-zeros output {i} passes under {policy} (error {cmp.max_rel_error:.3g})"


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("name", NAMES)
def test_constant_never_passes(name, policy, screened):
    _, outs, _ = screened(name)
    for i, ref in enumerate(outs):
        if ref.numel() > 1:  # a single number's mean is the number itself
            cmp = compare(_constant_like(ref), ref, POLICIES[policy])
            assert not cmp.ok, f"a constant output {i} passes under {policy} (error {cmp.max_rel_error:.3g})"


@pytest.mark.parametrize("name", NAMES)
def test_reference_is_finite_under_every_allowed_distribution(name):
    module, model = _reference(name)
    for distribution in distributions_for(module):
        for seed in (21, 22):
            for i, out in enumerate(_run(module, model, seed, distribution)):
                if out.is_floating_point():
                    assert torch.isfinite(out).all(), f"output {i} not finite under '{distribution}' (seed {seed})"


@pytest.mark.parametrize("name", NAMES)
def test_small_sizes_name_real_variables_and_shrink_the_work(name):
    problem = load_problem(name)
    full = problem.load()
    small_sizes = getattr(full, "SMALL_SIZES", None)
    assert small_sizes, "no SMALL_SIZES: the problem cannot be checked on a CPU"
    missing = [k for k in small_sizes if not hasattr(full, k)]
    assert not missing, f"SMALL_SIZES names variables the problem does not have: {missing}"
    assert compute_cost(problem.load(small=True)).flops < compute_cost(full).flops


@pytest.mark.parametrize("name", NAMES)
def test_full_size_cost_is_positive(name):
    cost = compute_cost(load_problem(name).load())
    assert cost.flops > 0
    assert cost.bytes > 0
    assert cost.inputs and cost.outputs
