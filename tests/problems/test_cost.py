"""FLOPs and bytes computed from the reference on the meta device, and the roofline they feed."""

from __future__ import annotations

import math

import pytest
import torch

from kernelcraft import hardware
from kernelcraft.problems import load_problem
from kernelcraft.problems.cost import TensorSpec, compute_cost, uses_tensor_cores


def cost_of(name: str, small: bool = False):
    return compute_cost(load_problem(name).load(small=small))


def test_matmul_4096():
    cost = cost_of("level1/matmul")
    assert cost.flops == 2 * 4096 ** 3
    assert cost.matmul_flops == cost.flops
    assert cost.bytes == 3 * 4096 * 4096 * 4  # read A and B, write C, in fp32
    assert cost.matmul_dtype == "float32"
    assert not uses_tensor_cores(cost)
    assert cost.intensity == pytest.approx(2 * 4096 ** 3 / (3 * 4096 * 4096 * 4))


def test_matmul_fp16_bytes_and_tensor_cores():
    cost = cost_of("level1/matmul_fp16")
    assert cost.flops == 2 * 4096 ** 3
    assert cost.bytes == 3 * 4096 * 4096 * 2
    assert cost.matmul_dtype == "float16"
    assert uses_tensor_cores(cost)


def test_small_sizes_scale_the_cost():
    cost = cost_of("level1/matmul", small=True)
    assert cost.flops == 2 * 197 ** 3
    assert cost.bytes == 3 * 197 * 197 * 4


def test_elementwise_relu_is_one_flop_per_element():
    numel = 4096 * 16384
    cost = cost_of("level1/relu")
    assert cost.flops == numel
    assert cost.matmul_flops == 0
    assert cost.matmul_dtype is None
    assert cost.bytes == 2 * numel * 4


def test_conv_counts_multiply_adds_and_parameters():
    cost = cost_of("level1/conv2d_alexnet")
    n, cin, cout, k, ho = 100, 3, 96, 11, 55
    assert cost.flops == 2 * n * cout * ho * ho * cin * k * k
    params = (cout * cin * k * k + cout) * 4
    assert cost.bytes == n * cin * 224 * 224 * 4 + n * cout * ho * ho * 4 + params


def test_to_dict_is_json_ready():
    d = cost_of("level1/softmax", small=True).to_dict()
    assert d["inputs"] == [{"shape": [37, 1000], "dtype": "float32"}]
    assert d["outputs"] == [{"shape": [37, 1000], "dtype": "float32"}]
    assert d["flops"] > 0 and d["bytes"] == 2 * 37 * 1000 * 4


def test_tensor_spec_bytes():
    assert TensorSpec((3, 5), torch.float16).nbytes == 30
    assert TensorSpec((), torch.int64).nbytes == 8
    assert TensorSpec((7, 0), torch.float32).nbytes == 0


def test_compute_cost_allocates_nothing_real():
    # Full-size softmax is 1 GiB per tensor: on the meta device this must be instant and free.
    cost = cost_of("level1/softmax")
    assert cost.bytes == 2 * 4096 * 65536 * 4


# -- hardware -----------------------------------------------------------------------------------------

def test_spec_for_device_names():
    assert hardware.spec_for("NVIDIA H100 80GB HBM3").name == "H100"
    assert hardware.spec_for("NVIDIA H100 PCIe").name == "H100 PCIe"
    assert hardware.spec_for("NVIDIA H100 NVL").name == "H100 NVL"
    assert hardware.spec_for("NVIDIA H200").name == "H200"
    assert hardware.spec_for("NVIDIA A100-SXM4-80GB").name == "A100"
    assert hardware.spec_for("NVIDIA A100-PCIE-40GB").name == "A100 40GB"
    assert hardware.spec_for("NVIDIA L40S").name == "L40S"
    assert hardware.spec_for("Tesla T4") is None


def test_rooflines_use_datasheet_ceilings_not_measurements():
    h100, h200 = hardware.spec_for("NVIDIA H100 80GB HBM3"), hardware.spec_for("NVIDIA H200")
    assert (h100.bandwidth, h100.fp32, h100.tf32, h100.fp16) == (3.35e12, 67e12, 494.7e12, 989.4e12)
    assert (h200.bandwidth, h200.fp32, h200.tf32, h200.fp16) == (4.8e12, 67e12, 494.7e12, 989.4e12)
    assert hardware.spec_for("NVIDIA A100-SXM4-80GB").bandwidth == 2.039e12
    assert hardware.spec_for("NVIDIA A100-SXM4-40GB").bandwidth == 1.555e12
    for spec in hardware.KNOWN.values():
        assert "datasheet" in spec.source
        m = spec.measured
        if m:  # what was reached never exceeds the ceiling, else the ceiling is wrong
            for field in ("bandwidth", "fp32", "tf32", "fp16"):
                assert getattr(m, field) is None or getattr(m, field) <= getattr(spec, field)
    # level1/matmul fp32 at the 2.5 ms an honest kernel ran on an H100: under the ceiling's floor
    mm = cost_of("level1/matmul")
    assert hardware.roofline_seconds(h100, mm.flops, mm.bytes, "fp32") * 1e3 / 2.5 < 1.0


def test_an_ambiguous_name_gets_the_larger_figures():
    assert hardware.spec_for("NVIDIA H100").bandwidth == 3.35e12  # SXM, not PCIe's 2.0
    assert hardware.spec_for("NVIDIA A100 80GB PCIe").bandwidth == 2.039e12


def test_review_flags_a_time_below_the_roofline_floor():
    from kernelcraft.result import Result
    from kernelcraft.verify import judge

    result = Result("level1/matmul", "c", "cuda_nvrtc", roofline_fraction=1.08)
    judge.review(judge.Case(None, None, result, None, None, None, 0, None), sanity_bound=10.0)
    assert "speedup_review" in result.reasons
    fine = Result("level1/matmul", "c", "cuda_nvrtc", roofline_fraction=1.04)
    judge.review(judge.Case(None, None, fine, None, None, None, 0, None), sanity_bound=10.0)
    assert fine.reasons == []


def test_roofline_takes_the_slower_of_math_and_memory():
    spec = hardware.KNOWN["H100"]
    mm = cost_of("level1/matmul")
    assert hardware.roofline_seconds(spec, mm.flops, mm.bytes, "fp32") == pytest.approx(mm.flops / spec.fp32)
    assert hardware.roofline_seconds(spec, mm.flops, mm.bytes, "tf32") == pytest.approx(mm.flops / spec.tf32)
    relu = cost_of("level1/relu")
    assert hardware.roofline_seconds(spec, relu.flops, relu.bytes, "fp32") == pytest.approx(
        relu.bytes / spec.bandwidth)
    assert math.isclose(hardware.roofline_seconds(spec, 0, 0, "fp16"), 0.0)
    with pytest.raises(KeyError):
        hardware.roofline_seconds(spec, 1, 1, "fp8")


BRANCHY = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 24)

    def forward(self, x):
        return self.fc(x) if x.sum() > 0 else -self.fc(x)  # reads a value: cannot run on shapes alone


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
"""


def test_a_forward_that_reads_a_value_is_counted_on_the_cpu_where_small(tmp_path, monkeypatch):
    import kernelcraft.problems.cost as cost_module
    from kernelcraft.problems.problem import ProblemError

    path = tmp_path / "branchy.py"
    path.write_text(BRANCHY)
    module = load_problem(path).load()
    cost = compute_cost(module)
    assert cost.matmul_flops == 2 * 16 * 32 * 24 and [s.shape for s in cost.outputs] == [(16, 24)]
    monkeypatch.setattr(cost_module, "CPU_COUNT_LIMIT", 1024)
    with pytest.raises(ProblemError, match="reads tensor values .* not run on the CPU to count it"):
        compute_cost(module)


def _recurrent_module(kind: str, bidirectional: bool, proj: int = 0, batch_first: bool = False):
    import types

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            extra = {"proj_size": proj} if proj else {}
            self.rnn = getattr(torch.nn, kind)(16, 32, 3, batch_first=batch_first, bidirectional=bidirectional,
                                               **extra)

        def forward(self, x):
            out = self.rnn(x)
            return out[0], out[1][0] if kind == "LSTM" else out[1]

    shape = (4, 48, 16) if batch_first else (48, 4, 16)
    return types.SimpleNamespace(Model=Model, get_init_inputs=lambda: [], get_inputs=lambda: [torch.randn(shape)])


@pytest.mark.parametrize("kind, bidirectional, proj, batch_first", [
    ("GRU", True, 0, False), ("LSTM", False, 0, True), ("LSTM", True, 8, False), ("RNN", True, 0, False)])
def test_a_recurrent_layer_is_counted_whole_as_its_decomposition_counts_it(monkeypatch, kind, bidirectional, proj,
                                                                           batch_first):
    from kernelcraft.problems import cost

    module = _recurrent_module(kind, bidirectional, proj, batch_first)
    whole = compute_cost(module)
    monkeypatch.setattr(cost, "_RECURRENT", {})  # torch's own decomposition, step by step
    stepped = compute_cost(module)
    assert whole.matmul_flops == stepped.matmul_flops
    assert abs(whole.flops / stepped.flops - 1) < 0.01
    assert [s.shape for s in whole.outputs] == [s.shape for s in stepped.outputs]
    assert whole.bytes == stepped.bytes and whole.matmul_dtype == stepped.matmul_dtype == "float32"
    assert 0.95 < whole.peak_bytes / stepped.peak_bytes < 1.6  # never much below what the decomposition holds
