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
