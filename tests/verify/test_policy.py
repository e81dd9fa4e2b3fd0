"""Tolerance policies and the fp32 math the reference runs in under each."""

import pytest
import torch

from kernelcraft.verify.policy import POLICIES, get_policy, reference_math, set_exact_fp32


def test_policies_and_unknown_name():
    assert not get_policy("strict").allow_tf32 and get_policy("relaxed").allow_tf32
    assert "exact" in get_policy("strict").to_dict()["reference_fp32"]
    assert "defaults" in get_policy("relaxed").to_dict()["reference_fp32"]
    with pytest.raises(ValueError, match="strict"):
        get_policy("loose")
    assert set(POLICIES) == {"strict", "relaxed"}


def test_the_precision_rule_and_the_per_element_allowance_are_named_and_recorded():
    strict, relaxed = get_policy("strict").to_dict(), get_policy("relaxed").to_dict()
    assert get_policy("strict").precision and "element by element" in strict["precision_rule"]
    assert not get_policy("relaxed").precision and relaxed["precision_rule"] is None
    for recorded in (strict, relaxed):  # the float64 re-judgement's allowance, per element under every policy
        assert (recorded["rounding_factor"], recorded["rounding_samples"], recorded["noise_floor_ulps"]) == (10, 8, 256)


@pytest.fixture
def tf32_on():
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = True
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def test_reference_math_turns_tf32_off_only_when_exact_and_restores(tf32_on):
    with reference_math(False):
        assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32
    with reference_math(True):
        assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
    assert torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32
    assert set_exact_fp32(True) == (True, True) and not torch.backends.cudnn.allow_tf32
