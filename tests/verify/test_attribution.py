"""Kernel attribution: which declared kernels are the candidate's own, and what the verdict is."""

from __future__ import annotations

import pytest
import torch

from kernelcraft.backends import declared_kernels
from kernelcraft.verify.attribution import Attribution, KernelShare, count_triton_launches, is_custom
from kernelcraft.verify.judge import attribution_finding
from tests.helpers import FIXTURES


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


def test_library_kernels_on_torchs_own_streams_are_not_the_candidates_side_streams():
    """PyTorch runs a grouped 3D transposed convolution on streams of its own (KernelBench level 1 #72, seen on
    an H100) and joins them: a candidate calling it beside its own kernel is not hiding work."""
    ran = info(KernelShare("copy_out_kernel", True, 1, 1.0, [7]),
               KernelShare("void at::native::vol2col_kernel<float>", False, 4, 8.0, [13, 14, 15, 16]),
               streams=(7, 13, 14, 15, 16), timing_stream=7)
    assert attribution_finding(ran, True) is None
    assert attribution_finding(ran, False)[0] == "library_kernels"


def test_a_one_letter_kernel_name_is_declared_and_matched_only_as_the_kernel_itself():
    source = '@triton.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr):\n    pass\n'
    assert declared_kernels(source) == {"k"}
    assert declared_kernels('extern "C" __global__ void k(float* y) {}') == {"k"}
    assert is_custom("k", {"k"}) and is_custom("k_0d1d2de", {"k"})
    assert is_custom("k(float const*, float*, int)", {"k"}) and is_custom("void k<float>(float*)", {"k"})
    # a short name inside a library kernel's name is not the candidate's kernel
    assert not is_custom("void cutlass::Kernel<k>(Params)", {"k"})
    assert not is_custom("void at::native::k(float*)", {"k"})
    assert not is_custom("void gemm<float, k, 4>(float*)", {"k"})
    assert not is_custom("kernel_k", {"k"}) and not is_custom("k2", {"k"})


def _interpreted(monkeypatch, fixture: str):
    """A fixture's ModelNew with its Triton kernels under the interpreter, as a CPU worker runs them."""
    import importlib.util

    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # read when @triton.jit decorates
    spec = importlib.util.spec_from_file_location(f"kc_{fixture}", FIXTURES / f"{fixture}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ModelNew()


def test_on_the_cpu_a_launch_that_raised_counts_for_nothing(monkeypatch):
    x = torch.randn(37, 1000)
    fell_back = count_triton_launches(_interpreted(monkeypatch, "relu_triton_raises_then_torch"), [x], {"relu_kernel"})
    assert fell_back.kernels == [] and fell_back.custom_fraction == 0.0
    assert attribution_finding(fell_back.to_dict(), True)[0] == "no_custom_kernel"
    honest = count_triton_launches(_interpreted(monkeypatch, "relu_triton"), [x], {"relu_kernel"})
    assert [(k.name, k.custom, k.calls) for k in honest.kernels] == [("relu_kernel", True, 1)]
    assert 0.5 < honest.custom_fraction <= 1.0


def test_on_the_cpu_torch_work_around_a_launch_is_not_the_candidates(monkeypatch):
    # the call's time outside its launches (torch's own CPU work) lowers the custom fraction
    import time
    from types import SimpleNamespace

    pytest.importorskip("triton")
    from triton.runtime.interpreter import InterpretedFunction

    monkeypatch.setattr(InterpretedFunction, "run", lambda self, *args, **kwargs: time.sleep(0.02))
    kernel = SimpleNamespace(fn=SimpleNamespace(__name__="k"))

    def call(x):
        InterpretedFunction.run(kernel)  # a launch of `k`, 20 ms
        time.sleep(0.06)  # stands for torch ops the candidate runs besides its kernel
        return x

    share = count_triton_launches(call, [torch.ones(1)], {"k"})
    assert [(k.name, k.calls) for k in share.kernels] == [("k", 1)]
    assert 0.1 < share.custom_fraction < 0.45


def test_each_kernels_registers_and_shared_memory_are_read_from_the_profilers_trace():
    """launch_resources: the CUDA activity's figures, one per kernel name; events of other kinds and kernels without
    them are left out; a trace that cannot be written gives nothing."""
    import json as _json

    from kernelcraft.verify.attribution import launch_resources

    class Profile:
        def __init__(self, events):
            self.events = events

        def export_chrome_trace(self, path):
            if self.events is None:
                raise RuntimeError("no trace")
            with open(path, "w") as f:
                _json.dump({"traceEvents": self.events}, f)

    events = [{"cat": "kernel", "name": "softmax_kernel", "args": {"registers per thread": 32, "shared memory": 128}},
              {"cat": "kernel", "name": "softmax_kernel", "args": {"registers per thread": 99, "shared memory": 0}},
              {"cat": "kernel", "name": "no_figures", "args": {"stream": 7}},
              {"cat": "cpu_op", "name": "aten::mm", "args": {"registers per thread": 1}}]
    assert launch_resources(Profile(events)) == {"softmax_kernel": (32, 128)}
    assert launch_resources(Profile(None)) == {}
