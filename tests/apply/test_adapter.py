"""A model given as a file exposing `model` and `example_inputs`: made a KernelBench-format problem that holds the
model's own weights, applied end to end (the kernels read those weights), and files that are neither form said in
one line."""

from __future__ import annotations

import pytest
import torch

import kernelcraft
from kernelcraft import api
from kernelcraft.apply.adapter import ModelFileError, is_model_file, model_problem
from tests.apply.conftest import DEVICE

MODEL_FILE = '''
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32)
        self.fc2 = nn.Linear(32, 6)

    def forward(self, x, scale):
        return self.fc2(torch.relu(self.fc1(x))) * scale


model = Net()
with torch.no_grad():
    model.fc2.bias.fill_(3.0)  # "trained" weights no seed would draw


def example_inputs():
    return torch.randn(9, 20), torch.rand(9, 6)
'''


def test_the_model_file_becomes_a_problem_holding_its_weights(tmp_path):
    path = tmp_path / "net.py"
    path.write_text(MODEL_FILE)
    assert is_model_file(path) and not is_model_file(tmp_path / "missing.py")
    problem = model_problem(path, tmp_path / "out")
    module = problem.load()
    a, b = module.Model(), module.Model()  # every copy: the model's weights, whatever the seed
    assert torch.equal(a.model.fc2.bias, torch.full((6,), 3.0)) and torch.equal(a.model.fc1.weight, b.model.fc1.weight)
    x, scale = module.get_inputs()
    assert x.shape == (9, 20) and scale.shape == (9, 6) and module.get_init_inputs() == []
    torch.testing.assert_close(a(x, scale), a.model(x, scale))


def test_apply_on_a_model_file(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    path = tmp_path / "net.py"
    path.write_text(MODEL_FILE)
    outcome = api.apply(str(path), device=DEVICE, size="full", rounds=1, max_candidates=1, compile_baseline=False,
                        timing_budget=0.3, min_share=0.0, replace="correct", store=tmp_path / "runs.db",
                        out_dir=tmp_path / "out")
    assert outcome.status == "done" and outcome.model == "net" and outcome.replaced, outcome.to_dict()
    assert outcome.end_to_end.correct
    from kernelcraft.problems import load_problem

    loaded = load_problem(tmp_path / "out" / "net.py").load()
    model = loaded.Model().eval().to(DEVICE)
    fast = kernelcraft.apply(model, tmp_path / "out")
    x, scale = (t.to(DEVICE) for t in loaded.get_inputs())
    with torch.no_grad():
        torch.testing.assert_close(fast(x, scale), model(x, scale), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("body, said", [
    ("model = 3\nexample_inputs = [torch.randn(2)]", "not an nn.Module"),
    ("model = torch.nn.ReLU()\nexample_inputs = [1, 2]", "must be a tensor"),
    ("model = torch.nn.ReLU()\ndef example_inputs():\n    raise OSError('no data here')", "OSError: no data here"),
])
def test_a_bad_model_file_is_one_line(tmp_path, body, said):
    path = tmp_path / "bad.py"
    path.write_text("import torch\n" + body + "\n")
    with pytest.raises(ModelFileError, match=said):
        model_problem(path, tmp_path / "out")
