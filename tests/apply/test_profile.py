"""A model's time by region, on the CPU: the model and every region's standalone forward, timed interleaved."""

from __future__ import annotations

import pytest
import torch

from kernelcraft.apply import extract_model
from kernelcraft.apply.profile import profile
from kernelcraft.problems import load_problem
from kernelcraft.verify.timing import TimingConfig


def test_profile_times_the_model_and_each_region():
    module = load_problem("level3/resnet_basic_block").load(small=True)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).eval()
    inputs = list(module.get_inputs())
    extraction = extract_model(model, inputs, "resnet")
    result = profile(extraction, model, inputs, "cpu", TimingConfig(warmup_ms=5, min_samples=5, budget_s=0.5))
    assert result.device == "cpu" and result.method == "cpu_perf_counter" and result.model_ms > 0
    assert [r.name for r in result.regions] == [r.name for r in extraction.regions]
    assert all(r.ms > 0 and r.share == r.ms / result.model_ms for r in result.regions)
    assert result.covered == pytest.approx(sum(r.share for r in result.regions))
    assert any("convolution" in op for op, _ in result.top_ops)
    shared = extraction.with_shares(result.shares)
    assert [r.share for r in shared.regions] == [r.share for r in result.regions]
    assert all(r.share is None for r in extraction.regions)  # the extraction itself is left as it was


def test_a_cpu_profile_runs_with_the_verifiers_threads_and_gives_them_back():
    """The verifier's CPU worker runs one intra-op thread (VerifyConfig.cpu_threads): the profile times the model
    and its regions so too (on every core a 2-core machine's profile said 13.3 ms where the verifier said 22.0),
    and leaves the caller's thread count as it was."""
    import torch.nn as nn

    seen = []

    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 16)

        def forward(self, x):
            seen.append(torch.get_num_threads())
            return torch.relu(self.fc(x))

    model, inputs = Counting().eval(), [torch.randn(4, 16)]
    extraction = extract_model(model, inputs, "counting")
    before, seen[:] = torch.get_num_threads(), []  # the capture ran it too
    result = profile(extraction, model, inputs, "cpu", TimingConfig(warmup_ms=1, min_samples=3, budget_s=0.1),
                     threads=1)
    assert seen and set(seen) == {1} and torch.get_num_threads() == before
    assert result.model_ms > 0
