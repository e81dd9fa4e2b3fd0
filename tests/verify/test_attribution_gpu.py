"""Attribution by launch on a real GPU, in this process (no worker): what torch.profiler and the launch recorders
give there, which the CPU tests (test_attribution_evidence.py) stand in for. The assumptions checked: a Triton
kernel's profiled name is its compiled name; ATen's kernels are linked to the `aten::` op they were launched
inside; NVRTC's kernels are profiled by their `extern "C"` names.

Skipped where torch sees no CUDA device (the `gpu` marker).
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

from kernelcraft.backends import declared_kernels
from kernelcraft.verify.attribution import (NAME_ONLY, NVRTC_LAUNCH, TRITON_LAUNCH, profile_call,
                                            profiled_kernels, record_launches)
from kernelcraft.verify.judge import attribution_finding
from tests.helpers import TESTS

pytestmark = pytest.mark.gpu
HONEST = TESTS / "adversarial" / "fixtures" / "c29_name_squatting_honest.py"
PROBE = "kc_attribution_gpu_probe"  # the module the fixture's kernel is defined in, here


@pytest.fixture(scope="module")
def honest():
    """The honest twin's model (its Triton kernel is named `vectorized_elementwise_kernel`), imported as PROBE."""
    pytest.importorskip("triton")
    spec = importlib.util.spec_from_file_location(PROBE, HONEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ModelNew()


@pytest.fixture
def x():
    return torch.randn(37, 1000, device="cuda")


def test_own_launch_and_atens_namesake_are_told_apart(honest, x):
    declared = declared_kernels(HONEST.read_text())
    honest(x)  # compiled before the profiled call
    attribution = profile_call(lambda t: (honest(t), torch.relu(t)), [x], declared, modules={PROBE})
    own = [k for k in attribution.kernels if k.custom]
    assert [(k.name, k.calls, k.evidence) for k in own] == [("vectorized_elementwise_kernel", 1, TRITON_LAUNCH)], \
        attribution.to_dict()
    aten = [k for k in attribution.kernels if not k.custom]
    assert aten and all(k.evidence == NAME_ONLY and "at::native" in k.name for k in aten), attribution.to_dict()
    assert attribution.launches == {"vectorized_elementwise_kernel": 1}
    assert attribution_finding(attribution.to_dict(), allow_library=False)[0] == "library_kernels"


def test_the_squatter_alone_has_no_kernel_of_its_own(x):
    declared = declared_kernels(HONEST.read_text())
    attribution = profile_call(torch.relu, [x], declared, modules={PROBE})
    assert attribution.kernels and not attribution.custom_ran, attribution.to_dict()
    reason, message = attribution_finding(attribution.to_dict(), allow_library=True)
    assert reason == "no_custom_kernel" and "carries the name of a kernel the candidate declares" in message


def test_nvrtc_launches_are_profiled_by_their_extern_c_name(x):
    pytest.importorskip("cuda.core")
    from kernelcraft.backends.nvrtc import load_kernels

    source = r'''
extern "C" __global__ void vectorized_elementwise_kernel(const float* x, float* y, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}
'''
    kernels = load_kernels(source)
    y = torch.empty_like(x)

    def call(t):
        kernels.vectorized_elementwise_kernel(t, y, t.numel(), grid=((t.numel() + 255) // 256,), block=(256,))
        return torch.relu(t)

    call(x)
    attribution = profile_call(call, [x], declared_kernels(source), modules=set())
    own = [(k.name, k.calls, k.evidence) for k in attribution.kernels if k.custom]
    assert own == [("vectorized_elementwise_kernel", 1, NVRTC_LAUNCH)], attribution.to_dict()
    assert all(k.evidence == NAME_ONLY for k in attribution.kernels if not k.custom), attribution.to_dict()
