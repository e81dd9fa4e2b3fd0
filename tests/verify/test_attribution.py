"""Kernel attribution: which declared kernels are the candidate's own, and what the verdict is."""

from __future__ import annotations

from kernelcraft.verify.attribution import Attribution, KernelShare, declared_kernels, is_custom
from kernelcraft.verify.judge import attribution_finding


def info(*kernels: KernelShare, streams=(7,), timing_stream=7) -> dict:
    total = sum(k.device_us for k in kernels) or 1.0
    custom = sum(k.device_us for k in kernels if k.custom)
    return Attribution(list(kernels), custom / total, list(streams), timing_stream).to_dict()


def test_declared_kernels_finds_cuda_and_triton_names():
    source = '''
SRC = r"""extern "C" __global__ void __launch_bounds__(256) row_softmax(const float* x) {}
__global__ void helper_kernel(float* y) {}"""
@triton.jit
def fused_gelu(x_ptr, n, BLOCK: tl.constexpr):
    pass
'''
    assert declared_kernels(source) == {"row_softmax", "helper_kernel", "fused_gelu"}


def test_custom_means_the_name_appears_as_a_whole_identifier():
    assert is_custom("void row_softmax<float>(float const*, float*)", {"row_softmax"})
    assert is_custom("fused_gelu", {"fused_gelu"})
    assert is_custom("fused_gelu_0d1d2", {"fused_gelu"})  # a Triton specialisation suffix
    assert not is_custom("void at::native::softmax_warp_forward<float>", {"softmax"})
    assert not is_custom("ampere_sgemm_128x64_nn", {"gemm"})
    assert not is_custom("my_relu", {"relu"})


def test_no_custom_kernel_is_found_whatever_else_ran():
    verdict = attribution_finding(info(KernelShare("void at::native::vectorized_elementwise_kernel", False, 1, 10.0)), True)
    assert verdict[0] == "no_custom_kernel" and "vectorized_elementwise_kernel" in verdict[1]
    assert attribution_finding(info(), True)[0] == "no_custom_kernel"


def test_library_kernels_beside_custom_ones_depend_on_the_policy():
    ran = info(KernelShare("relu_kernel", True, 1, 8.0), KernelShare("ampere_sgemm_128x64_nn", False, 1, 2.0))
    assert attribution_finding(ran, allow_library=True) is None
    assert attribution_finding(ran, allow_library=False)[0] == "library_kernels"


def test_a_kernel_on_another_stream_is_found():
    ran = info(KernelShare("relu_kernel", True, 1, 8.0, [7, 13]), streams=(7, 13), timing_stream=7)
    reason, message = attribution_finding(ran, True)
    assert reason == "side_stream" and "[13]" in message
    assert attribution_finding(info(KernelShare("relu_kernel", True, 1, 8.0)), True) is None
