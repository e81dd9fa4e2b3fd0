"""The triplet margin loss (F.triplet_margin_loss, nn.TripletMarginLoss; p = 2): the analysis of each spelling
(margin and eps read from the module or from self.<attr>, swap, every reduction) and of what it declines, in
words; every move against torch on odd shapes (rows shorter and longer than a tile, one row, 1-D inputs, empty
rows), margins that clamp some rows, swap, NaN; the suite problem and upstream KernelBench's 99_TripletMarginLoss.

Without a GPU the kernels run in Triton's interpreter (conftest.py)."""

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Op
from tests.helpers import KERNELBENCH
from tests.propose.builtin.kernel_check import (DEVICE, HEAD, assert_no_torch_compute, check_small_problem, ident,
                                                load, moves, render)
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::UserWarning")  # (legacy reduce)

TRIPLE = "[torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 8)]"


def triplet(margin=1.0, margin_attr=None, eps=1e-6, eps_attr=None, swap=False, reduction="mean"):
    return "triplet_margin", {"margin": margin, "margin_attr": margin_attr, "eps": eps, "eps_attr": eps_attr,
                              "swap": swap, "reduction": reduction}


@pytest.mark.parametrize("forward, init, want", [
    ("return F.triplet_margin_loss(a, p, n)", "", triplet()),
    ("return F.triplet_margin_loss(a, p, n, margin=0.5, swap=True, reduction='sum')", "",
     triplet(0.5, swap=True, reduction="sum")),
    ("return F.triplet_margin_loss(a, p, n, self.margin, 2, self.eps, reduction='none')",
     "self.margin = 0.25\nself.eps = 1e-3", triplet(0.25, "margin", 1e-3, "eps", reduction="none")),
    ("return self.crit(a, p, n)", "self.crit = nn.TripletMarginLoss(margin=2.0)",
     triplet(2.0, "crit.margin", 1e-6, "crit.eps")),
    ("return self.crit(a, p, n)", "self.crit = nn.TripletMarginLoss(swap=True, reduction='none', eps=0.01)",
     triplet(1.0, "crit.margin", 0.01, "crit.eps", swap=True, reduction="none")),
])
def test_spellings(tmp_path, forward, init, want):
    analysis = analyze(write(tmp_path, forward, init, inputs=TRIPLE, args="a, p, n"))
    assert analysis.single is not None and analysis.n_inputs == 3, analysis
    assert (analysis.single.kind, analysis.single.detail) == want


@pytest.mark.parametrize("forward, init, inputs, missing", [
    ("return F.triplet_margin_loss(a, p, n, p=1)", "", TRIPLE, "triplet_margin_loss"),  # (spellings.bind: p 2)
    ("return self.crit(a, p, n)", "self.crit = nn.TripletMarginLoss(p=3.0)", TRIPLE, "triplet_margin_loss (p=3.0)"),
    ("return F.triplet_margin_loss(a, p, n, reduce=False)", "", TRIPLE, "triplet_margin_loss (reduce)"),
    ("return F.triplet_margin_loss(a, n, p)", "", TRIPLE, "triplet_margin_loss"),  # swapped
    ("return F.triplet_margin_loss(a * 2.0, p, n)", "", TRIPLE, "triplet_margin_loss"),
    ("return F.triplet_margin_loss(a, p, n)", "", "[torch.randn(4, 8), torch.randn(4, 8), torch.randn(1, 8)]",
     "triplet_margin_loss (broadcast)"),
    ("return F.triplet_margin_loss(a, p, n, margin=a.shape[1] / 4)", "", TRIPLE,
     "triplet_margin_loss (a margin or eps computed in forward)"),
])
def test_refusals(tmp_path, forward, init, inputs, missing):
    analysis = analyze(write(tmp_path, forward, init, inputs=inputs, args="a, p, n"))
    assert analysis.single is None and analysis.error is None and missing in analysis.unsupported, analysis


@pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(), reason="no KernelBench copy")
def test_upstream_problem_reads_as_one_op():
    analysis = analyze(load_problem(KERNELBENCH / "level1" / "99_TripletMarginLoss.py"))
    assert analysis.single is not None and (analysis.single.kind, analysis.single.detail) == \
        triplet(1.0, "loss_fn.margin", 1e-6, "loss_fn.eps")


def reference(reduction: str, swap: bool) -> str:
    return (HEAD + "class Model(nn.Module):\n    def __init__(self, margin=1.0, eps=1e-6):\n        super().__init__()\n"
            f"        self.crit = nn.TripletMarginLoss(margin=margin, eps=eps, swap={swap}, reduction='{reduction}')\n\n"
            "    def forward(self, a, p, n):\n        return self.crit(a, p, n)\n")


SHAPES = [(5, 7), (3, 2, 33), (1, 4500), (9,), (2, 3, 1), (4, 0), (0, 6), (64, 130)]


def check(reduction: str, swap: bool, params, tmp_path, shapes=SHAPES, margins=((1.0, 1e-6), (3.0, 0.5))):
    op = Op("triplet_margin", triplet(1.0, "crit.margin", 1e-6, "crit.eps", swap, reduction)[1])
    source = render(op, reference(reduction, swap), params)
    assert_no_torch_compute(source)
    module = load(source, tmp_path)
    for margin, eps in margins:  # read from the module at run time
        for shape in shapes:
            torch.manual_seed(0)
            scales = [0.5 + torch.rand(*shape[:-1], 1) for _ in range(3)] if shape[:-1] else [1.0] * 3
            a, p, n = ((torch.randn(shape) * s).to(DEVICE) for s in scales)
            want = module.Model(margin, eps)(a, p, n)
            got = module.ModelNew(margin, eps)(a, p, n)
            assert got.shape == want.shape and got.dtype == want.dtype, (shape, got.shape, want.shape)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, equal_nan=True,
                                       msg=lambda m: f"{shape} {margin}: {m}")


OP = Op("triplet_margin", triplet()[1])


@pytest.mark.parametrize("params", [m.params for m in moves(OP)], ids=ident)
def test_every_move(params, tmp_path):
    check("mean", False, params, tmp_path)
    check("sum", True, params, tmp_path, shapes=SHAPES[:4])


@pytest.mark.parametrize("params", [m.params for m in moves(Op("triplet_margin", triplet(reduction="none")[1]))],
                         ids=ident)
def test_every_move_unreduced(params, tmp_path):
    check("none", False, params, tmp_path)
    check("none", True, params, tmp_path, shapes=SHAPES[:4])


def test_moves_tell_unreduced_from_reduced():
    reduced, kept = moves(OP), moves(Op("triplet_margin", triplet(reduction="none")[1]))
    assert all("partial" in m.text for m in reduced) and not any("partial" in m.text for m in kept)
    assert len({m.text for m in reduced}) == len(reduced)


def test_nan_rows(tmp_path):
    """A NaN in a row makes its distance and loss NaN (the clamp at 0 passes it), and the mean NaN, as in torch."""
    for reduction in ("none", "mean"):
        x = torch.randn(3, 5, device=DEVICE)
        y = x.clone()
        y[1, 2] = float("nan")
        module = load(render(Op("triplet_margin", triplet(1.0, "crit.margin", 1e-6, "crit.eps", True, reduction)[1]),
                             reference(reduction, True), moves(OP)[0].params), tmp_path)
        want, got = module.Model()(x, y, x * 2), module.ModelNew()(x, y, x * 2)
        assert want.isnan().any()
        torch.testing.assert_close(got, want, equal_nan=True)


def test_suite_problem(tmp_path):
    problem = load_problem("level1/triplet_margin_loss")
    op = analyze(problem).single
    assert (op.kind, op.detail) == triplet(1.0, "loss_fn.margin", 1e-6, "loss_fn.eps")
    for m in moves(op):
        check_small_problem(op, problem, m.params, tmp_path)
