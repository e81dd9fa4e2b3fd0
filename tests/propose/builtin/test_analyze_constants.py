"""Numbers made tensors in forward (torch.tensor(c), torch.tensor(c, device=x.device), fx's constants of them),
torch.min/max/minimum/maximum of a tensor and a number or another tensor, torch's long aliases (multiply,
subtract, divide), squeeze/unsqueeze as free views, and x @ W.T as a linear: what analyze() reads, and the
candidates right against torch (NaN included)."""

import pytest
import torch

from kernelcraft.propose.builtin.analyze import analyze
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def read(tmp_path, forward, init="", inputs="[torch.randn(4, 8)]", args="x"):
    analysis = analyze(write(tmp_path, forward, init, inputs=inputs, args=args))
    assert analysis.error is None and not analysis.unsupported, analysis
    return [(op.kind, op.src, op.detail.get("steps") or {k: v for k, v in op.detail.items()
                                                          if k in ("squeeze", "unsqueeze", "weight", "bias")})
            for op in analysis.ops]


@pytest.mark.parametrize("forward, steps", [
    ("return torch.min(x, torch.tensor(0.5))", [["clamp", None, 0.5]]),
    ("return torch.max(x, torch.tensor(-0.25, device=x.device))", [["clamp", -0.25, None]]),
    ("return torch.minimum(torch.tensor(1.5), x)", [["clamp", None, 1.5]]),
    ("return x.maximum(torch.tensor(0.0, device=x.device)) * 2.0", [["clamp", 0.0, None], ["mul", 2.0]]),
    ("return torch.multiply(x, 3.0) - torch.subtract(x, 1.0)", None),
    ("return torch.divide(x, 4.0)", [["div", 4.0]]),
])
def test_numbers_made_tensors_are_numbers(tmp_path, forward, steps):
    found = read(tmp_path, forward)
    if steps is not None:
        assert found == [("elementwise", "x", steps)]


def test_a_number_forward_reads_from_the_module_stays_a_run_time_read(tmp_path):
    found = read(tmp_path, "return torch.min(x, torch.tensor(self.c)) * self.s", "self.c = 0.75\nself.s = 2.5")
    assert found == [("elementwise", "x", [["clamp", None, "self.c"], ["mul", "self.s"]])]


def test_the_minimum_of_two_tensors_is_a_tensor_step(tmp_path):
    assert read(tmp_path, "return torch.min(x, y)", inputs="[torch.randn(4, 8), torch.randn(8)]", args="x, y") == \
        [("elementwise", "x", [["tmin", ("input", 1)]])]
    assert read(tmp_path, "return torch.max(x, self.p) - self.p", "self.p = nn.Parameter(torch.tensor(0.3))") == \
        [("elementwise", "x", [["tmax", ("attr", "p")], ["tsub", ("attr", "p")]])]


def test_a_reduction_keeps_its_dim(tmp_path):
    assert read(tmp_path, "return torch.min(x, 1)[0]")[0][0] == "reduce"
    assert read(tmp_path, "return torch.max(x, dim=-1, keepdim=True).values")[0][0] == "reduce"


def test_views_and_the_transpose_of_a_weight(tmp_path):
    assert read(tmp_path, "return x.unsqueeze(1).squeeze(1).squeeze() * 2.0") == [
        ("view", "x", {"unsqueeze": 1}), ("view", 0, {"squeeze": 1}), ("view", 1, {"squeeze": None}),
        ("elementwise", 2, [["mul", 2.0]])]
    assert read(tmp_path, "return torch.relu(torch.matmul(x, self.w.T))", "self.w = nn.Parameter(torch.randn(5, 8))") \
        == [("linear", "x", [["relu"]])]
    assert read(tmp_path, "return x @ self.w.t()", "self.w = nn.Parameter(torch.randn(5, 8))")[0][:2] == ("linear", "x")


def test_a_tensor_made_in_forward_that_is_not_a_number_is_said(tmp_path):
    analysis = analyze(write(tmp_path, "return x + torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])", ""))
    assert "a tensor made in forward" in analysis.unsupported


NAN = torch.tensor([[float("nan"), 1.0, -2.0, 0.25, float("nan"), 3.0, -0.5, 0.0]] * 3)


@pytest.mark.parametrize("forward, single", [
    ("return torch.min(x, torch.tensor(0.3, device=x.device))", True),
    ("return torch.maximum(x, y)", False),  # tensor operands: a chain of one broadcast op
    ("return torch.min(y, x) * 2.0", False),
])
def test_candidates_match_torch_nan_included(tmp_path, forward, single):
    y = NAN.flip(1)
    check_chain(tmp_path, forward, "", [[NAN, y], [torch.randn(5, 8), torch.randn(8)]], args="x, y", single=single,
                equal_nan=True)


def test_a_chain_through_views_and_a_weight_transpose(tmp_path):
    check_chain(tmp_path, "return torch.sigmoid(torch.matmul(x, self.w.T)).unsqueeze(1).squeeze(1)",
                "self.w = nn.Parameter(torch.randn(6, 8))", [[(4, 8)], [(1, 8)], [(3, 8)]])
    check_chain(tmp_path, "return x.unsqueeze(1) * y", "", [[(5,), (5, 7)], [(3,), (3, 2)]], args="x, y")
