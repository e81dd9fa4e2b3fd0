"""Attribution by what the candidate's code launched or built, never by name (hack class 29, name squatting).

The rules (verify/attribution.py `attribute`) on synthetic profiler records; the reading of torch.profiler's
kineto events (`profiled_kernels`) on fake events shaped like them; the launch recorders (Triton's JITFunction.run
and a compiled kernel's launcher, NVRTC's Launcher) with Triton's launch itself stood in for. The kernels an
extension's shared object holds: tests/verify/test_elf_kernels.py. All of it runs on the CPU.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
import torch

from kernelcraft.result import Result
from kernelcraft.verify.attribution import (CALLS_EXCEED_LAUNCHES, EXTENSION_SYMBOL, INSIDE_LIBRARY_OP, NAME_ONLY,
                                            NVRTC_LAUNCH, TRITON_LAUNCH, Attribution, KernelShare, Launches, Ran,
                                            attribute, is_custom,
                                            profiled_kernels, record_launches)
from kernelcraft.verify.judge import attribution_finding

ATEN_RELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_"
             "scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::"
             "{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, "
             "std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::launch_clamp_scalar(...), "
             "std::array<char*, 2ul>)")
CUTLASS_SGEMM = ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align4>"
                 "(cutlass_80_simt_sgemm_128x128_8x4_nn_align4::Params)")
CUBLAS_SGEMM = "ampere_sgemm_128x64_nn"


def one(attribution: Attribution) -> list[tuple]:
    return [(k.name, k.custom, k.calls, k.evidence) for k in attribution.kernels]


# -- the rules ---------------------------------------------------------------------------------------------------


def test_a_declared_kernel_never_launched_does_not_make_atens_kernel_the_candidates():
    declared = {"vectorized_elementwise_kernel"}
    assert is_custom(ATEN_RELU, declared)  # what attribution by name credited
    for op in ("aten::clamp_min", None):  # whether or not the profiler linked the kernel to its op
        ran = attribute([Ran(ATEN_RELU, 7, 10.0, op)], Launches(), declared, 7)
        assert one(ran) == [(ATEN_RELU[:200], False, 1, NAME_ONLY)] and ran.custom_fraction == 0.0
        reason, message = attribution_finding(ran.to_dict(), allow_library=False)
        assert reason == "no_custom_kernel"
        assert "carries the name of a kernel the candidate declares" in message and "never launched" in message


def test_gemm_kernels_named_like_the_candidates_are_library_kernels():
    declared = {"cutlass", "Kernel2", CUBLAS_SGEMM}
    assert is_custom(CUTLASS_SGEMM, declared) and is_custom(CUBLAS_SGEMM, declared)
    ran = attribute([Ran(CUTLASS_SGEMM, 7, 40.0, "aten::mm"), Ran(CUBLAS_SGEMM, 7, 30.0, None)], Launches(),
                    declared, 7)
    assert not ran.custom_ran and {k.evidence for k in ran.kernels} == {NAME_ONLY}
    assert attribution_finding(ran.to_dict(), allow_library=True)[0] == "no_custom_kernel"


def test_the_candidates_own_launch_counts_by_its_exact_name_whatever_it_is_named():
    declared = {"vectorized_elementwise_kernel"}
    launched = Launches(triton={"vectorized_elementwise_kernel": 1})
    ran = attribute([Ran("vectorized_elementwise_kernel", 7, 8.0)], launched, declared, 7)
    assert one(ran) == [("vectorized_elementwise_kernel", True, 1, TRITON_LAUNCH)] and ran.custom_fraction == 1.0
    assert attribution_finding(ran.to_dict(), allow_library=False) is None
    assert ran.launches == {"vectorized_elementwise_kernel": 1}
    # beside it, ATen's kernel of the same (carried) name stays ATen's: exact names only
    both = attribute([Ran("vectorized_elementwise_kernel", 7, 8.0), Ran(ATEN_RELU, 7, 2.0, "aten::clamp_min")],
                     launched, declared, 7)
    assert one(both) == [("vectorized_elementwise_kernel", True, 1, TRITON_LAUNCH),
                         (ATEN_RELU[:200], False, 1, NAME_ONLY)]
    assert both.custom_fraction == 0.8
    assert attribution_finding(both.to_dict(), allow_library=True) is None
    reason, message = attribution_finding(both.to_dict(), allow_library=False)
    assert reason == "library_kernels" and "carries the name" in message


def test_a_library_kernel_of_the_same_plain_name_launched_inside_an_op_is_the_librarys():
    """cuBLAS's kernel names are plain identifiers: a Triton kernel can have one exactly. The one launched inside
    aten::mm is cuBLAS's; the other, launched by the candidate, is the candidate's."""
    launched = Launches(triton={CUBLAS_SGEMM: 1})
    ran = attribute([Ran(CUBLAS_SGEMM, 7, 1.0, None), Ran(CUBLAS_SGEMM, 7, 50.0, "aten::mm")], launched,
                    {CUBLAS_SGEMM}, 7)
    assert sorted(one(ran)) == [(CUBLAS_SGEMM, False, 1, INSIDE_LIBRARY_OP), (CUBLAS_SGEMM, True, 1, TRITON_LAUNCH)]
    assert ran.custom_fraction == round(1 / 51, 4)
    assert attribution_finding(ran.to_dict(), allow_library=False)[0] == "library_kernels"


def test_more_calls_of_a_name_than_the_candidate_launched_count_for_none():
    """Where the profiler could not link them to ops, which calls were the candidate's cannot be told."""
    launched = Launches(triton={CUBLAS_SGEMM: 1})
    ran = attribute([Ran(CUBLAS_SGEMM, 7, 1.0), Ran(CUBLAS_SGEMM, 7, 50.0)], launched, {CUBLAS_SGEMM}, 7)
    assert one(ran) == [(CUBLAS_SGEMM, False, 2, CALLS_EXCEED_LAUNCHES)]
    reason, message = attribution_finding(ran.to_dict(), allow_library=True)
    assert reason == "no_custom_kernel" and "more of them ran than the candidate's code launched" in message
    # as many calls as launches: all the candidate's
    three = attribute([Ran("k", 7, 1.0)] * 3, Launches(triton={"k": 3}), {"k"}, 7)
    assert one(three) == [("k", True, 3, TRITON_LAUNCH)]


def test_nvrtc_launches_are_the_evidence_for_nvrtc_kernels():
    launched = Launches(nvrtc={"relu": 2})
    ran = attribute([Ran("relu", 7, 3.0), Ran("relu", 7, 3.0), Ran("gelu", 7, 1.0)], launched, {"relu", "gelu"}, 7)
    assert one(ran) == [("relu", True, 2, NVRTC_LAUNCH), ("gelu", False, 1, NAME_ONLY)]
    assert attribute([Ran("relu", 7, 3.0)] * 3, launched, {"relu"}, 7).kernels[0].evidence == CALLS_EXCEED_LAUNCHES


def test_an_extensions_kernel_is_the_candidates_by_its_exact_symbol_outside_library_ops():
    own = "relu_kernel(float const*, float*, long)"
    built = Launches(extension={own, "vectorized_elementwise_kernel(float const*, float*, long)",
                                "void cub::DeviceReduceKernel<float>(float const*)"})
    declared = {"relu_kernel", "vectorized_elementwise_kernel"}
    assert one(attribute([Ran(own, 7, 5.0)], built, declared, 7)) == [(own, True, 1, EXTENSION_SYMBOL)]
    # an op the candidate registered itself is no library op
    assert attribute([Ran(own, 7, 5.0, "my_ops::relu")], built, declared, 7).custom_ran
    # the same symbol launched inside an ATen op (an instantiation ATen holds too) is ATen's
    assert one(attribute([Ran(own, 7, 5.0, "aten::relu")], built, declared, 7)) == [
        (own, False, 1, INSIDE_LIBRARY_OP)]
    # ATen's templated kernel is not the extension's kernel of the same short name
    squat = attribute([Ran(ATEN_RELU, 7, 5.0, "aten::clamp_min")], built, declared, 7)
    assert one(squat) == [(ATEN_RELU[:200], False, 1, NAME_ONLY)]
    # a library template (CUB) instantiated in the extension is held there, but declared nowhere: a library kernel
    cub = "void cub::DeviceReduceKernel<float>(float const*)"
    assert one(attribute([Ran(cub, 7, 1.0)], built, declared, 7)) == [(cub, False, 1, None)]


def test_copies_and_fills_and_unnamed_kernels_are_library_kernels():
    ran = attribute([Ran("[Memcpy]", 7, 1.0), Ran("[Memset]", 7, 1.0)], Launches(triton={"k": 1}), {"k"}, 7)
    assert not ran.custom_ran and {k.evidence for k in ran.kernels} == {None}


def test_records_written_before_evidence_existed_still_read():
    old = {"kernels": [{"name": "relu_kernel", "custom": True, "calls": 1, "device_us": 8.0, "streams": [7]},
                       {"name": ATEN_RELU, "custom": False, "calls": 1, "device_us": 2.0, "streams": [7]}],
           "custom_fraction": 0.8, "streams": [7], "timing_stream": 7}
    assert attribution_finding(old, allow_library=True) is None
    reason, message = attribution_finding(old, allow_library=False)
    assert reason == "library_kernels" and "carries the name" not in message
    result = Result.from_dict({"problem": "level1/relu", "candidate": "c", "backend": "triton", "status": "ok",
                               "kernels": old["kernels"], "custom_kernel_fraction": 0.8})
    assert result.kernels == old["kernels"]
    new = Attribution([KernelShare("k", True, 1, 1.0, [7], TRITON_LAUNCH)], 1.0, [7], 7, {"k": 1}).to_dict()
    assert set(old) <= set(new) and new["kernels"][0]["evidence"] == TRITON_LAUNCH
    assert attribution_finding(new, allow_library=False) is None


# -- the profiler's records ----------------------------------------------------------------------------------------


class Event:
    """A kineto event as torch.profiler's `kineto_results.events()` gives it."""

    def __init__(self, name, device, activity, corr=0, linked=0, stream=0, ns=1000, annotation=False):
        self._v = (name, device, activity, corr, linked, stream, ns, annotation)

    def name(self):
        return self._v[0]

    def device_type(self):
        return self._v[1]

    def activity_type(self):
        return self._v[2]

    def correlation_id(self):
        return self._v[3]

    def linked_correlation_id(self):
        return self._v[4]

    def device_resource_id(self):
        return self._v[5]

    def duration_ns(self):
        return self._v[6]

    def is_user_annotation(self):
        return self._v[7]


def test_profiled_kernels_names_the_op_each_kernel_was_launched_inside():
    from torch.autograd import DeviceType

    cpu, cuda = DeviceType.CPU, DeviceType.CUDA
    events = [
        Event("aten::relu", cpu, "cpu_op", corr=4),
        Event("aten::clamp_min", cpu, "cpu_op", corr=5),
        Event("cudaLaunchKernel", cpu, "cuda_runtime", corr=4, linked=5),  # CUPTI's ids: they collide with ops'
        Event("vectorized_elementwise_kernel", cpu, "user_annotation", corr=9, annotation=True),
        Event("void at::native::spin_kernel(long)", cuda, "kernel", corr=1, stream=7, ns=1000),
        Event(ATEN_RELU, cuda, "kernel", corr=4, linked=5, stream=7, ns=2000),
        Event("vectorized_elementwise_kernel", cuda, "kernel", corr=6, stream=7, ns=3000),
        Event("vectorized_elementwise_kernel", cuda, "gpu_user_annotation", corr=9, stream=7, ns=5000),
        Event("Memcpy DtoD (Device -> Device)", cuda, "gpu_memcpy", corr=7, linked=4, stream=7, ns=500),
    ]
    ran, timing_stream = profiled_kernels(events)
    assert timing_stream == 7
    assert ran == [Ran(ATEN_RELU, 7, 2.0, "aten::clamp_min"), Ran("vectorized_elementwise_kernel", 7, 3.0, None),
                   Ran("[Memcpy]", 7, 0.5, "aten::relu")]


# -- the launch recorders ------------------------------------------------------------------------------------------


def test_triton_launches_are_recorded_by_compiled_name_for_the_candidates_module_only(monkeypatch):
    pytest.importorskip("triton")
    from triton.runtime.jit import JITFunction

    def run(self, *args, grid=None, warmup=False, **kwargs):  # stands for compiling and launching
        if args and args[0] == "raise":
            raise RuntimeError("launch failed")
        return SimpleNamespace(name=f"{self.fn.__name__}_compiled")

    monkeypatch.setattr(JITFunction, "run", run)
    own = SimpleNamespace(fn=SimpleNamespace(__name__="relu_kernel", __module__="kc_candidate"))
    other = SimpleNamespace(fn=SimpleNamespace(__name__="relu_kernel", __module__="some_library"))
    with record_launches({"kc_candidate"}) as launches:
        JITFunction.run(own, grid=(1,), warmup=False)
        JITFunction.run(own, grid=(1,), warmup=False)
        JITFunction.run(own, grid=(1,), warmup=True)  # compiles, launches nothing
        JITFunction.run(other, grid=(1,), warmup=False)  # a library's kernel of the same name
        with pytest.raises(RuntimeError):
            JITFunction.run(own, "raise", grid=(1,), warmup=False)
    assert launches.triton == {"relu_kernel_compiled": 2} and launches.nvrtc == {}
    assert JITFunction.run is run  # put back
    JITFunction.run(own, grid=(1,), warmup=False)
    assert launches.triton == {"relu_kernel_compiled": 2}  # nothing recorded after


def test_a_compiled_kernels_own_launcher_is_recorded_too(monkeypatch):
    pytest.importorskip("triton")
    import triton.runtime.jit  # noqa: F401 - the recorder watches Triton once it is imported
    from triton.compiler.compiler import CompiledKernel

    ran = []
    monkeypatch.setattr(CompiledKernel, "__getitem__", lambda self, grid: lambda *args: ran.append(grid))
    jit = SimpleNamespace(fn=SimpleNamespace(__name__="k", __module__="kc_candidate"))
    kernel = SimpleNamespace(name="k", src=SimpleNamespace(fn=jit))
    with record_launches({"kc_candidate"}) as launches:
        CompiledKernel.__getitem__(kernel, (4, 1, 1))(1, 2)
        CompiledKernel.__getitem__(SimpleNamespace(name="other", src=None), (1, 1, 1))()
    assert ran == [(4, 1, 1), (1, 1, 1)] and launches.triton == {"k": 1}


def test_nvrtc_launches_are_recorded_only_while_attributing():
    from kernelcraft.backends import nvrtc

    assert nvrtc._launches is None
    with record_launches() as launches:
        assert nvrtc._launches is launches.nvrtc
        nvrtc._launches["relu"] = 1  # what Launcher.__call__ adds after each launch
    assert nvrtc._launches is None and launches.nvrtc == {"relu": 1}


def test_without_triton_imported_triton_is_left_alone(monkeypatch):
    monkeypatch.delitem(sys.modules, "triton.runtime.jit", raising=False)
    with record_launches() as launches:
        pass
    assert launches.triton == {}
