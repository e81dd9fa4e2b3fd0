"""CUDA graphs for a host-bound model (apply/cuda_graphs.py): when the compiled forms replay them, the kernels they
take (by the device's time), torch.compile of the model with them as a baseline verified like a candidate, and the
final model chosen among them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kernelcraft.apply.cuda_graphs import baseline, baseline_source, host_bound_compiled
from kernelcraft.apply.outcome import GRAPHS_FILE, RegionOutcome
from kernelcraft.apply.settle import compiled_regions
from kernelcraft.apply.times import final_of
from kernelcraft.errors import KernelcraftError
from kernelcraft.problems import load_problem
from kernelcraft.result import Result, Timing
from kernelcraft.verify import Verifier, VerifyConfig
from tests.helpers import small_config


def timing(host: float, device: float | None) -> Timing:
    return Timing(host, 0.0, 0.0, 10, host, "cuda_events+l2_flush", host_ms=host, device_ms=device, lead_ms=0.5)


def test_a_model_host_bound_under_torch_compile_wants_cuda_graphs():
    """BERT-base bf16 at 32 x 128 tokens on an H200 under torch.compile: 4.54 ms a call on the host, 2.62 on the
    device; Llama-style at 4 x 1024 tokens: 4.24 and 3.98."""
    assert host_bound_compiled(timing(4.54, 2.62)).startswith("the model is host-bound under torch.compile "
                                                              "(4.54 ms a call on the host, 2.62 ms on the device)")
    assert host_bound_compiled(timing(4.24, 3.98)) is None
    assert host_bound_compiled(timing(4.54, None)) is None  # no device time: a CPU's
    assert host_bound_compiled(None) is None  # torch.compile not timed


def _region(name: str, kernel: Timing, compiled: Timing, status: str = "slower") -> RegionOutcome:
    result = Result(name, "k", "triton", correct=True, runtime=kernel, compiled=compiled,
                    speedup_compile=compiled.cost_ms / kernel.cost_ms)
    return RegionOutcome(name, "attention", 0.1, 0.1, status, result=result)


def test_under_cuda_graphs_a_kernel_goes_in_by_the_device_time_it_saves():
    """BERT's attention region on an H200: 0.117 ms a call on the host for the kernel and for torch.compile's code
    alike, 0.0168 and 0.0295 ms on the device. Replayed as a CUDA graph only the device's time is left."""
    verifier = SimpleNamespace(config=VerifyConfig())
    attention = _region("01_attention", timing(0.117, 0.0168), timing(0.117, 0.0295))
    slower_on_device = _region("02_norm", timing(0.05, 0.02), timing(0.06, 0.015))  # less host, more device
    regions = [attention, slower_on_device]
    assert compiled_regions(regions, verifier) == [slower_on_device]  # by cost: the host's time
    assert compiled_regions(regions, verifier, graphs=True) == [attention]
    assert compiled_regions(regions, SimpleNamespace(config=VerifyConfig(compile_baseline=False)), graphs=True) == []


@pytest.mark.parametrize("compiled_kernels, graphs, final", [
    (None, 2.7, "torch.compile, CUDA graphs"), (2.5, 2.7, "compiled with kernels"),
    (None, None, "torch.compile"), (None, 5.0, "torch.compile")])
def test_torch_compile_with_cuda_graphs_is_a_final_model_where_fastest(compiled_kernels, graphs, final):
    forms = {"compiled with kernels": compiled_kernels} if compiled_kernels else {}
    name, ms = final_of(8.2, 4.5, forms, graphs_ms=graphs)
    assert name == final and ms == {"torch.compile": 4.5, "torch.compile, CUDA graphs": graphs, **forms}[name]


MODEL = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return torch.relu(self.lin(x)) * 2.0


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
'''


def test_torch_compile_of_the_model_with_cuda_graphs_is_verified_like_a_candidate(tmp_path):
    """The baseline's file is the model's, unchanged, and a ModelNew compiling it; the verifier, its static guards
    on, judges it right, with no kernel of its own asked for (on a CPU inductor records no graph: the file is the
    same)."""
    (tmp_path / "mlp.py").write_text(MODEL)
    problem = load_problem(tmp_path / "mlp.py")
    notes, events = [], []
    with Verifier("cpu", small_config(tmp_path / "cache", static_guards=True)) as verifier:
        verdict = baseline(problem, verifier, tmp_path / "out", notes, lambda kind, data: events.append((kind, data)))
    assert verdict.correct, (verdict.status, verdict.message)
    text = (tmp_path / "out" / GRAPHS_FILE).read_text()
    assert text.startswith(MODEL.rstrip("\n")) and '"triton.cudagraphs": True' in text
    assert any(n.startswith("kernel attribution: not checked") for n in verdict.notes)
    assert events == [("apply_verify", {"regions": [], "compiled": True, "graphs": True, "baseline": True})]
    assert notes == []


def test_a_model_file_that_defines_model_new_has_no_baseline_written_beside_it():
    with pytest.raises(KernelcraftError, match="defines ModelNew"):
        baseline_source(MODEL + "\n\nclass ModelNew(nn.Module):\n    pass\n", "m")


def test_the_share_of_the_model_its_final_kernels_hold_follows_the_final_model():
    """BERT's attention kernels went into the compiled form only (the eager form was not verified): the record's
    share is of the model given back, which holds them, not of the eager form's none."""
    from kernelcraft.apply.outcome import ApplyOutcome, CompiledForm

    regions = [RegionOutcome("08_attention", "attention", 0.05, 0.29, "slower"),
               RegionOutcome("19_attention", "attention", 0.05, 0.29, "slower", like="08_attention"),
               RegionOutcome("12_linear", "linear", 0.2, 0.1, "replaced")]
    outcome = ApplyOutcome("a", "bert", "export", "cuda:0", "done", None, regions,
                           compiled=CompiledForm(["08_attention", "19_attention"], graphs=True),
                           times={"final": "compiled with kernels"})
    assert outcome.final_regions == ["08_attention", "19_attention"] and outcome.final_share == pytest.approx(0.1)
    assert outcome.replaced_share == pytest.approx(0.2)
    outcome.times["final"] = "with kernels"
    assert outcome.final_regions == ["12_linear"]
    outcome.times["final"] = "torch.compile, CUDA graphs"
    assert outcome.final_regions == [] and outcome.final_share == 0.0
