"""F.kl_div of log-probabilities (or of torch.log of probabilities, the log fused) against a target: the analysis
of each spelling (functional and nn.KLDivLoss, every reduction, log_target) and of what it declines, in words;
every move against torch on odd shapes with zeros in the target (torch's rule: a target 0 adds 0), log targets,
NaN where torch has NaN; upstream KernelBench's 98_KLDivLoss.

Without a GPU the kernels run in Triton's interpreter (conftest.py)."""

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Op
from tests.helpers import KERNELBENCH
from tests.propose.builtin.families.loss.test_analyze import PAIR, loss_op
from tests.propose.builtin.families.loss.test_kernels import check2, reference2
from tests.propose.builtin.kernel_check import DEVICE, ident, load, moves, render
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::UserWarning")  # (reduction 'mean')


def kl(reduction="mean", log_target=False, log_input=False):
    return "kl_div", {"reduction": reduction, "log_target": log_target, "log_input": log_input}


@pytest.mark.parametrize("forward, init, want", [
    ("return F.kl_div(torch.log(a), b, reduction='batchmean')", "", kl("batchmean", log_input=True)),
    ("return F.kl_div(a.log(), b, reduction='sum')", "", kl("sum", log_input=True)),
    ("return F.kl_div(a, b)", "", kl()),
    ("return F.kl_div(a, b, reduction='none', log_target=True)", "", kl("none", True)),
    ("return F.kl_div(a, b, None, None, 'batchmean', True)", "", kl("batchmean", True)),
    ("return self.crit(torch.log(a), b)", "self.crit = nn.KLDivLoss(reduction='batchmean')",
     kl("batchmean", log_input=True)),
    ("return self.crit(a, b)", "self.crit = nn.KLDivLoss(reduction='sum', log_target=True)", kl("sum", True)),
    ("return self.crit(a, b)", "self.crit = nn.KLDivLoss(size_average=False)", kl("sum")),  # the module's reduction
])
def test_spellings(tmp_path, forward, init, want):
    assert loss_op(tmp_path, forward, init) == want


@pytest.mark.parametrize("forward, init, inputs, missing", [
    ("return F.kl_div(a, b)", "", "[torch.randn(4, 8), torch.randn(8)]", "kl_div (broadcast)"),
    ("return F.kl_div(torch.log(a), b, reduce=False)", "", PAIR, "kl_div (size_average or reduce)"),
    ("return F.kl_div(b, a)", "", PAIR, "kl_div"),  # swapped
    ("return F.kl_div(torch.exp(a), b)", "", PAIR, "kl_div"),
    ("return F.kl_div(a, torch.log(b), log_target=True)", "", PAIR, "kl_div"),  # (a target computed in forward)
])
def test_refusals(tmp_path, forward, init, inputs, missing):
    analysis = analyze(write(tmp_path, forward, init, inputs=inputs, args="a, b"))
    assert analysis.single is None and analysis.error is None and missing in analysis.unsupported, analysis


@pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(), reason="no KernelBench copy")
def test_upstream_problem_reads_as_one_op():
    analysis = analyze(load_problem(KERNELBENCH / "level1" / "98_KLDivLoss.py"))
    assert analysis.single is not None and (analysis.single.kind, analysis.single.detail) == \
        kl("batchmean", log_input=True)


SHAPES = [(3, 17), (1,), (2, 3, 130), (5, 1000), (20001,)]


def cases(log_target: bool, log_input: bool):
    """(init, input, target) per shape: probabilities (or their logs) with zeros in a target of probabilities (a
    log target of 0 is -inf, NaN in torch: test_nan_where_torch_has_nan)."""
    out = []
    for i, s in enumerate(SHAPES):
        torch.manual_seed(i)
        p, q = torch.rand(s).softmax(-1), torch.rand(s)
        out.append(((), p if log_input else p.log(), q.log() if log_target else torch.where(q < 0.2, 0.0, q)))
    return out


def ref(reduction: str, log_target: bool, log_input: bool) -> str:
    x = "torch.log(a)" if log_input else "a"
    return reference2(f"F.kl_div({x}, b, reduction='{reduction}', log_target={log_target})")


OP = Op("kl_div", {"reduction": "batchmean", "log_target": False, "log_input": True})


@pytest.mark.parametrize("params", [m.params for m in moves(OP)], ids=ident)
def test_every_move(params, tmp_path):
    for reduction, log_target, log_input in (("batchmean", False, True), ("sum", True, False), ("mean", False, False),
                                             ("batchmean", True, True)):
        op = Op("kl_div", {"reduction": reduction, "log_target": log_target, "log_input": log_input})
        check2(op, ref(reduction, log_target, log_input), params, cases(log_target, log_input), tmp_path,
               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("params", [m.params for m in moves(Op("kl_div", {**OP.detail, "reduction": "none"}))],
                         ids=ident)
def test_every_move_unreduced(params, tmp_path):
    for log_target, log_input in ((False, True), (True, False)):
        op = Op("kl_div", {"reduction": "none", "log_target": log_target, "log_input": log_input})
        check2(op, ref("none", log_target, log_input), params, cases(log_target, log_input), tmp_path,
               rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("reduction", ["none", "sum"])
def test_nan_where_torch_has_nan(tmp_path, reduction):
    """log(0) is -inf: a target 0 there gives 0 * inf, NaN in torch and here; a negative target's log is NaN; a
    positive target against log(0) is inf. Summed: NaN."""
    op = Op("kl_div", {"reduction": reduction, "log_target": False, "log_input": True})
    module = load(render(op, ref(reduction, False, True), moves(op)[0].params), tmp_path)
    a = torch.tensor([[0.0, 0.5, 0.2, 0.0], [0.3, 0.3, 0.4, 0.1]], device=DEVICE)
    b = torch.tensor([[0.0, 0.0, 0.5, 0.5], [-0.1, 0.2, 0.0, 0.9]], device=DEVICE)
    want, got = module.Model()(a, b), module.ModelNew()(a, b)
    assert want.isnan().any()
    torch.testing.assert_close(got, want, equal_nan=True)
