"""The triangle family: torch.triu / torch.tril on their own. The analysis of each spelling (function, method, a
diagonal by position, keyword or module attribute, a triangle of a pointwise chain) and of what it declines, in
words; every move against torch on odd shapes (2-D, batched, one row or column, empty), diagonals inside, on and
beyond the matrix, NaN outside the triangle, and an integer tensor; the suite problem end to end.

Without a GPU the kernels run in Triton's interpreter (conftest.py)."""

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.kernel_check import DEVICE, check_small_problem, ident, load, moves, reference, render
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def tri(op="triu", diagonal=0, attr=None):
    return "triangle", {"op": op, "diagonal": diagonal, "diagonal_attr": attr}


@pytest.mark.parametrize("forward, init, want", [
    ("return torch.triu(x)", "", tri()),
    ("return torch.tril(x, -1)", "", tri("tril", -1)),
    ("return x.triu(2)", "", tri("triu", 2)),
    ("return x.tril(diagonal=3)", "", tri("tril", 3)),
    ("return torch.triu(x, diagonal=self.k)", "self.k = -2", tri("triu", -2, "k")),
])
def test_spellings(tmp_path, forward, init, want):
    analysis = analyze(write(tmp_path, forward, init, inputs="[torch.randn(4, 5)]"))
    assert analysis.single is not None, analysis
    assert (analysis.single.kind, analysis.single.detail) == want


def test_a_triangle_of_a_chain_reads_the_chain(tmp_path):
    analysis = analyze(write(tmp_path, "return torch.tril(torch.relu(x) * 2.0)", inputs="[torch.randn(4, 5)]"))
    assert [(op.kind, op.src) for op in analysis.chain] == [("elementwise", "x"), ("triangle", 0)]


@pytest.mark.parametrize("forward, missing", [
    ("return torch.triu(x, x.shape[0] - 5)", "triu (a diagonal computed in forward)"),
    ("return x.tril(x.size(1))", "tril (a diagonal computed in forward)"),
    ("return torch.triu(x, out=x)", "triu"),
])
def test_refusals(tmp_path, forward, missing):
    analysis = analyze(write(tmp_path, forward, inputs="[torch.randn(4, 5)]"))
    assert analysis.single is None and missing in analysis.unsupported, analysis


OP = Op("triangle", {"op": "triu", "diagonal": 0, "diagonal_attr": "k"})
SHAPES = [(5, 7), (3, 9, 4), (2, 2, 33, 65), (1, 6), (6, 1), (1, 1), (0, 4), (3, 0, 5)]


def check(which, params, tmp_path, diagonals=(0, 1, -2, 40, -40), dtype=torch.float32):
    op = Op("triangle", {"op": which, "diagonal": 0, "diagonal_attr": "k"})
    source = render(op, reference(f"torch.{which}(x, self.k)", "self, k=0", "self.k = k"), params)
    module = load(source, tmp_path)
    for k in diagonals:
        for shape in SHAPES:
            torch.manual_seed(0)
            x = (torch.randn(shape, device=DEVICE) * 10).to(dtype)
            want, got = module.Model(k)(x), module.ModelNew(k)(x)  # the diagonal read from the module at run time
            assert got.shape == want.shape and got.dtype == want.dtype
            torch.testing.assert_close(got, want, rtol=0, atol=0, msg=lambda m: f"{shape} {k}: {m}")


@pytest.mark.parametrize("params", [m.params for m in moves(OP)], ids=ident)
@pytest.mark.parametrize("which", ["triu", "tril"])
def test_every_move(params, which, tmp_path):
    check(which, params, tmp_path)


def test_moves_tell_the_kernels_apart():
    found = moves(OP)
    assert len({m.text for m in found}) == len(found) and {m.category for m in found} >= {"parallelism", "control"}


@pytest.mark.parametrize("params", [m.params for m in moves(OP)][2:4], ids=ident)
def test_integer_tensors_and_nan_outside(params, tmp_path):
    check("tril", params, tmp_path, diagonals=(0, -1), dtype=torch.int64)
    source = render(OP, reference("torch.triu(x, self.k)", "self, k=0", "self.k = k"), params)
    x = torch.full((9, 70), float("nan"), device=DEVICE)
    got = load(source, tmp_path).ModelNew(1)(x)
    assert torch.equal(torch.isnan(got), torch.isnan(torch.triu(x, 1)))  # zeros outside, as torch writes


def test_suite_problem(tmp_path):
    problem = load_problem("level1/tril")
    op = analyze(problem).single
    assert (op.kind, op.detail) == tri("tril", -1, "diagonal")
    for m in moves(op):
        check_small_problem(op, problem, m.params, tmp_path, rtol=0, atol=0)
