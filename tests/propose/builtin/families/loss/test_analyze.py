"""What analyze() reads out of losses: the suite problems (one Op each, and the first move's kernel right on their
small sizes), the nn.* and F.* spellings, the kl_div of two log_softmaxes fused, and what it must refuse, by name."""

from __future__ import annotations

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.problems.problem import Problem
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from tests.propose.builtin.kernel_check import moves, render
from tests.propose.builtin.kernel_check import DEVICE, assert_no_torch_compute
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SUITE = {
    "cross_entropy_loss": ("cross_entropy", {"reduction": "mean", "ignore_index": -100, "ignore_index_attr": None}),
    "mse_loss": ("loss", {"fn": "mse", "reduction": "mean", "param": None, "param_attr": None}),
    "kl_div_loss": ("kl_div_logits", {"dim": -1, "reduction": "batchmean"}),
    "smooth_l1_loss": ("loss", {"fn": "smooth_l1", "reduction": "mean", "param": 1.0, "param_attr": "beta"}),
}


@pytest.mark.parametrize("name", sorted(SUITE))
def test_suite_problems_give_their_single_op(name):
    analysis = analyze(load_problem(f"level1/{name}"))
    assert analysis.single is not None, analysis
    assert (analysis.single.kind, analysis.single.detail) == SUITE[name]
    assert analysis.n_inputs == 2


@pytest.mark.parametrize("name", sorted(SUITE))
def test_suite_problems_end_to_end_with_their_first_move(name, tmp_path):
    """Analysis, the first move's kernel and the problem's own small inputs, in eval mode like the verifier."""
    problem = load_problem(f"level1/{name}")
    op = analyze(problem).single
    source = render(op, problem.source, moves(op)[0].params)
    assert_no_torch_compute(source)
    path = tmp_path / f"{name}_candidate.py"
    path.write_text(source)
    module = Problem(name, path, source).load(small=True)
    init = module.get_init_inputs()
    torch.manual_seed(0)
    ref = module.Model(*init).to(DEVICE).eval()
    torch.manual_seed(0)
    new = module.ModelNew(*init).to(DEVICE).eval()
    torch.manual_seed(1)
    inputs = [t.to(DEVICE) for t in module.get_inputs()]
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), ref(*inputs), rtol=1e-4, atol=1e-4)


def test_the_proposer_covers_the_suite_losses():
    engineer = BuiltinProposer("cpu")
    for name in SUITE:
        op = engineer.coverage(load_problem(f"level1/{name}"), "triton").single
        assert op is not None and engineer.moves(op, "triton")



PAIR = "[torch.randn(4, 8), torch.randn(4, 8)]"
CE_IN = "[torch.randn(4, 8), torch.randint(0, 8, (4,))]"


def loss_op(tmp_path, forward, init="", inputs=PAIR):
    analysis = analyze(write(tmp_path, forward, init, inputs=inputs, args="a, b"))
    assert analysis.single is not None and analysis.n_inputs == 2, analysis
    return analysis.single.kind, analysis.single.detail


def loss(fn, reduction="mean", param=None, param_attr=None):
    return "loss", {"fn": fn, "reduction": reduction, "param": param, "param_attr": param_attr}


def ce(reduction="mean", ignore_index=-100, ignore_index_attr=None):
    return "cross_entropy", {"reduction": reduction, "ignore_index": ignore_index,
                             "ignore_index_attr": ignore_index_attr}


@pytest.mark.parametrize("forward, init, inputs, want", [
    ("return F.cross_entropy(a, b)", "", CE_IN, ce()),
    ("return self.crit(a, b)", "self.crit = nn.CrossEntropyLoss(ignore_index=3, reduction='none')", CE_IN,
     ce("none", 3, "crit.ignore_index")),
    ("return F.cross_entropy(a, b, ignore_index=self.ignore, reduction='sum')", "self.ignore = 5", CE_IN,
     ce("sum", 5, "ignore")),
    ("return F.cross_entropy(a, b)", "", "[torch.randn(2, 5, 3, 3), torch.randint(0, 5, (2, 3, 3))]", ce()),
    ("return F.mse_loss(a, b)", "", PAIR, loss("mse")),
    ("return self.crit(a, b)", "self.crit = nn.MSELoss(reduction='sum')", PAIR, loss("mse", "sum")),
    ("return F.l1_loss(a, b, reduction='none')", "", PAIR, loss("l1", "none")),
    ("return self.crit(a, b)", "self.crit = nn.L1Loss()", PAIR, loss("l1")),
    ("return F.smooth_l1_loss(a, b, beta=self.beta)", "self.beta = 0.5", PAIR, loss("smooth_l1", "mean", 0.5, "beta")),
    ("return F.smooth_l1_loss(a, b)", "", PAIR, loss("smooth_l1", "mean", 1.0)),
    ("return self.crit(a, b)", "self.crit = nn.SmoothL1Loss(beta=0.25)", PAIR,
     loss("smooth_l1", "mean", 0.25, "crit.beta")),
    ("return F.huber_loss(a, b, delta=2.0)", "", PAIR, loss("huber", "mean", 2.0)),
    ("return self.crit(a, b)", "self.crit = nn.HuberLoss(reduction='sum', delta=0.5)", PAIR,
     loss("huber", "sum", 0.5, "crit.delta")),
])
def test_loss_spellings(tmp_path, forward, init, inputs, want):
    assert loss_op(tmp_path, forward, init, inputs) == want


@pytest.mark.parametrize("forward, init, inputs, missing", [
    ("return F.cross_entropy(a, b, label_smoothing=0.1)", "", CE_IN, "cross_entropy (label_smoothing)"),
    ("return self.crit(a, b)", "self.crit = nn.CrossEntropyLoss(label_smoothing=0.2)", CE_IN,
     "cross_entropy (label_smoothing)"),
    ("return F.cross_entropy(a, b, weight=self.w)", "self.register_buffer('w', torch.ones(8))", CE_IN,
     "cross_entropy (weight)"),
    ("return self.crit(a, b)", "self.crit = nn.CrossEntropyLoss(weight=torch.ones(8))", CE_IN,
     "cross_entropy (weight)"),
    ("return F.cross_entropy(a, b.softmax(-1))", "", PAIR, "cross_entropy"),  # (a softmax of the second input)
    ("return F.cross_entropy(a, b)", "", PAIR, "cross_entropy (probability targets)"),
    ("return F.mse_loss(a, b)", "", "[torch.randn(4, 8), torch.randn(8)]", "mse_loss (broadcast)"),
    ("return F.mse_loss(b, a)", "", PAIR, "mse_loss"),  # operands swapped
    ("return F.l1_loss(a * 2.0, b)", "", PAIR, "l1_loss"),  # a fusion
    ("return F.mse_loss(a, b, reduce=False)", "", PAIR, "mse_loss (reduce)"),
    ("return F.mse_loss(a, b, weight=self.w)", "self.register_buffer('w', torch.ones(8))", PAIR, "mse_loss (weight)"),
    ("return F.huber_loss(a, b, reduction='batchmean')", "", PAIR, "huber_loss (reduction=batchmean)"),
])
def test_losses_refused_by_name(tmp_path, forward, init, inputs, missing):
    analysis = analyze(write(tmp_path, forward, init, inputs=inputs, args="a, b"))
    assert analysis.single is None and analysis.error is None
    assert missing in analysis.unsupported, analysis.unsupported


@pytest.mark.parametrize("forward, want", [
    ("return F.kl_div(F.log_softmax(a, 1), F.log_softmax(b, 1), reduction='sum', log_target=True)",
     {"dim": 1, "reduction": "sum"}),
    ("return F.kl_div(a.log_softmax(-1), torch.log_softmax(b, dim=-1), None, None, 'mean', True)",
     {"dim": -1, "reduction": "mean"}),
])
def test_kl_div_of_logits_spellings(tmp_path, forward, want):
    assert loss_op(tmp_path, forward) == ("kl_div_logits", want)


@pytest.mark.parametrize("forward, kinds, missing", [
    ("return F.kl_div(F.log_softmax(a, -1), F.log_softmax(b, -1), reduction='batchmean')", ["log_softmax"],
     ["log_softmax", "kl_div"]),  # log_target=False: the target is not log-probabilities
    ("return F.kl_div(F.log_softmax(a, 0), F.log_softmax(b, 1), log_target=True)", ["log_softmax"],
     ["log_softmax", "kl_div"]),
    ("return F.kl_div(F.log_softmax(b, -1), F.log_softmax(a, -1), log_target=True)", ["log_softmax"],
     ["log_softmax", "kl_div"]),  # swapped
    ("return F.kl_div(F.log_softmax(a, -1), F.log_softmax(b, -1), reduction='none', log_target=True)",
     ["log_softmax"], ["log_softmax", "kl_div"]),
    ("p = F.log_softmax(a, -1)\nreturn F.kl_div(p, F.log_softmax(b, -1), log_target=True) + p.sum()",
     ["log_softmax", "reduce"], ["log_softmax", "kl_div", "add"]),  # log p reused
    ("return F.kl_div(a * 2.0, b)", ["elementwise"], ["kl_div"]),  # neither log-probabilities nor their log
])
def test_kl_div_refused_keeps_the_covered_part(tmp_path, forward, kinds, missing):
    analysis = analyze(write(tmp_path, forward, inputs=PAIR, args="a, b"))
    assert analysis.single is None and analysis.error is None
    assert [op.kind for op in analysis.ops] == kinds and analysis.unsupported == missing
