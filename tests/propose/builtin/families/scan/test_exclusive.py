"""Exclusive scans as torch spells them (a cat of zeros and the cumsum of all but the last entries, upstream
KernelBench's 92_cumsum_exclusive; ones and cumprod for a product): analyze() reads the spelling as one scan Op with
exclusive, with a dim read from the module, and declines variants in words without losing the core's sizes and
cats; every move of the scan family against torch at shapes that take the multi-tile carry and the split path.
Without a GPU in Triton's interpreter (conftest.py)."""

import pytest

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Op
from tests.helpers import KERNELBENCH
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import check, ident, moves, reference
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def spelled(d, kind="cumsum", ident="zeros_like", narrow="x.narrow({d}, 0, x.size({d}) - 1)") -> str:
    narrowed = narrow.format(d=d)
    return (f"torch.cat((torch.{ident}(x.select({d}, 0).unsqueeze({d})), torch.{kind}({narrowed}, dim={d})), "
            f"dim={d})")


def excl(kind="cumsum", dim=1, dim_attr=None) -> Op:
    return Op("scan", {"op": kind, "dim": dim, "dim_attr": dim_attr, "exclusive": True})


@pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(), reason="no KernelBench copy")
def test_upstream_spelling():
    analysis = analyze(load_problem(KERNELBENCH / "level1" / "92_cumsum_exclusive.py"))
    assert analysis.single is not None and analysis.single.detail == excl(dim_attr="dim").detail


@pytest.mark.parametrize("forward, shape, want", [
    (spelled(1), "(3, 7)", excl()),
    (spelled(0), "(6, 4)", excl(dim=0)),
    (spelled(-1), "(2, 3, 5)", excl(dim=-1)),
    (spelled(-2, "cumprod", "ones_like"), "(2, 3, 5)", excl("cumprod", -2)),
    (spelled(1, narrow="torch.narrow(x, {d}, 0, x.size({d}) - 1)"), "(3, 7)", excl()),
])
def test_spellings(tmp_path, forward, shape, want):
    analysis = analyze(write(tmp_path, f"return {forward}", inputs=f"[torch.randn{shape}]"))
    assert analysis.single is not None, analysis
    assert analysis.single.detail == want.detail


def test_of_a_chain_and_with_the_dim_read_from_the_module(tmp_path):
    forward = ("y = torch.relu(x)\ncumsum = torch.cumsum(y.narrow(dim=self.dim, start=0, length=y.size(self.dim) - 1),"
               " dim=self.dim)\nreturn torch.cat((torch.zeros_like(y.select(self.dim, 0).unsqueeze(self.dim)), "
               "cumsum), dim=self.dim)")
    ops, _ = check_chain(tmp_path, forward, "self.dim = 1", [[(3, 40)], [(2, 2500)]], single=True)
    assert ops[0].detail == {**excl(dim_attr="dim").detail, "pre": [["relu"]]}  # the relu applied as rows load


@pytest.mark.parametrize("forward, missing", [
    ("return torch.cat((torch.cumsum(x.narrow(1, 0, x.size(1) - 1), dim=1), "
     "torch.zeros_like(x.select(1, 0).unsqueeze(1))), dim=1)", "narrow"),  # zeros last
    (f"return {spelled(1, narrow='x.narrow({d}, 1, x.size({d}) - 1)')}", "narrow"),  # starts at 1
    (f"return {spelled(1, ident='ones_like')}", "narrow"),  # a cumsum after ones
    (f"return {spelled(1, narrow='x.narrow(0, 0, x.size(0) - 1)')}", "narrow"),  # narrowed along another dim
    ("n = x.narrow(1, 0, x.size(1) - 1)\nreturn torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), "
     "torch.cumsum(n, dim=1)), dim=1) + n.sum()", "narrow"),  # the narrowed value read again
    ("return x.narrow(1, 0, 3)", "narrow"),
    ("return torch.zeros_like(x)", "zeros_like"),
])
def test_refusals(tmp_path, forward, missing):
    analysis = analyze(write(tmp_path, forward, inputs="[torch.randn(3, 7)]"))
    assert analysis.single is None and analysis.error is None and missing in analysis.unsupported, analysis


def test_sizes_and_cats_elsewhere_are_the_cores(tmp_path):
    analysis = analyze(write(tmp_path, "return torch.cat((torch.relu(x), x.view(x.size(0), -1)), dim=1)",
                             inputs="[torch.randn(3, 7)]"))
    assert sorted(op.kind for op in analysis.chain) == ["cat", "elementwise", "view"], analysis


CASES = [  # (op, dim, input shapes)
    (excl("cumsum", 1), 1, [(3, 37), (4, 1), (2, 5000), (1, 2)]),
    (excl("cumsum", 0), 0, [(37, 5), (3000, 3)]),
    (excl("cumsum", -2), -2, [(3, 17, 5), (2, 2100, 3)]),
    (excl("cumprod", -1), -1, [(3, 37), (2, 3, 2500)]),
]


@pytest.mark.parametrize("params", [m.params for m in moves(excl())], ids=ident)
def test_exclusive_scan_moves(params, tmp_path):
    for op, d, shapes in CASES:
        kind = op.detail["op"]
        expr = spelled(d, kind, "zeros_like" if kind == "cumsum" else "ones_like")
        scale = 0.1 if kind == "cumprod" else 1.0  # products of 2500 small factors: no overflow
        check(op, reference(expr), params, [((), s, scale) for s in shapes], tmp_path, rtol=1e-4, atol=1e-4)
