"""torch.triu / torch.tril of a matmul's result as the GEMM's epilogue mask: the analysis (the triangle folded into
the matmul after its steps, a diagonal read from the module at run time, and where it must stay an op of its own),
and every matmul move against torch with either triangle and several diagonals, on odd 2-D, batched, transposed,
broadcast (A of 3 dims over a 2-D B) and matrix-vector products, over shapes of several tiles so that tiles wholly
outside the triangle skip their products.

Without a GPU the kernels run in Triton's interpreter (conftest.py)."""

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import DEVICE, HEAD, ident, load, moves, render
from tests.propose.builtin.test_analyze import write
from tests.helpers import KERNELBENCH

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

PAIR = "[torch.randn(5, 8), torch.randn(8, 6)]"


def mask(op="triu", diagonal=0, attr=None):
    return {"op": op, "diagonal": diagonal, "diagonal_attr": attr}


@pytest.mark.parametrize("forward, init, want_mask, want_steps", [
    ("return torch.triu(torch.matmul(a, b))", "", mask(), None),
    ("return torch.tril(a @ b, -1)", "", mask("tril", -1), None),
    ("return (a @ b).triu(diagonal=2)", "", mask("triu", 2), None),
    ("return torch.tril(a @ b, self.diagonal)", "self.diagonal = 1", mask("tril", 1, "diagonal"), None),
    ("return torch.triu(torch.relu(a @ b) * 2.0)", "", mask(), [["relu"], ["mul", 2.0]]),  # steps, then the mask
])
def test_a_triangle_of_a_matmul_is_its_mask(tmp_path, forward, init, want_mask, want_steps):
    analysis = analyze(write(tmp_path, forward, init, inputs=PAIR, args="a, b"))
    op = analysis.single
    assert op is not None and op.kind == "matmul", analysis
    assert op.detail["mask"] == want_mask and op.detail.get("steps") == want_steps


def test_steps_after_the_mask_are_an_op_of_their_own(tmp_path):
    """The mask comes after the matmul's steps: a step after the triangle is a pointwise op after it."""
    analysis = analyze(write(tmp_path, "return torch.triu(a @ b) + 1.0", inputs=PAIR, args="a, b"))
    assert [(op.kind, op.detail.get("mask"), op.detail.get("steps")) for op in analysis.chain] == \
        [("matmul", mask(), None), ("elementwise", None, [["add", 1.0]])]


def test_a_product_also_read_unmasked_is_not_masked(tmp_path):
    analysis = analyze(write(tmp_path, "c = a @ b\nreturn torch.triu(c) + c", inputs="[torch.randn(5, 8), "
                             "torch.randn(8, 5)]", args="a, b"))
    assert [op.kind for op in analysis.chain] == ["matmul", "triangle", "elementwise"]
    assert "mask" not in analysis.chain[0].detail


@pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(), reason="no KernelBench copy")
@pytest.mark.parametrize("name, which", [("14_Matmul_for_upper_triangular_matrices", "triu"),
                                         ("15_Matmul_for_lower_triangular_matrices", "tril")])
def test_upstream_triangular_matmuls(name, which):
    op = analyze(load_problem(KERNELBENCH / "level1" / f"{name}.py")).single
    assert op is not None and op.kind == "matmul" and op.detail["mask"] == mask(which)


def reference(which: str, diagonal: int, ta: bool = False) -> str:
    a = "a.transpose(-2, -1)" if ta else "a"
    return (HEAD + "class Model(nn.Module):\n    def __init__(self, diagonal=0):\n        super().__init__()\n"
            "        self.diagonal = diagonal\n\n"
            "    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n"
            f"        return torch.{which}(torch.matmul({a}, b), self.diagonal)\n")


CASES = [((130, 9), (9, 150)), ((3, 70, 5), (3, 5, 66)), ((2, 70, 6), (6, 140)), ((7, 5), (5, 3)), ((1, 1), (1, 1)),
         ((2, 3, 0), (0, 4))]  # several tiles, a batch, A broadcast over B, few columns (GEMV), tiny, K == 0
T_CASES = [((9, 130), (9, 150)), ((2, 6, 70), (6, 140))]  # A transposed: (K, M) as passed


def check(which, params, tmp_path, diagonals=(0, -3, 2, 200)):
    for ta, cases in ((False, CASES), (True, T_CASES)):
        op = Op("matmul", {"trans_a": ta, "trans_b": False, "mask": mask(which, 0, "diagonal")})
        source = render(op, reference(which, 0, ta), params)
        module = load(source, tmp_path)
        tol = 2e-2 if params.precision == "tf32" and DEVICE == "cuda" else 1e-4
        for diagonal in diagonals:
            for sa, sb in cases:
                torch.manual_seed(0)
                a, b = (torch.randn(s, device=DEVICE) for s in (sa, sb))
                want = module.Model(diagonal)(a, b)
                got = module.ModelNew(diagonal)(a, b)  # the diagonal is read from the module at run time
                assert got.shape == want.shape, (sa, sb)
                torch.testing.assert_close(got, want, rtol=tol, atol=tol, msg=lambda m: f"{sa}@{sb} {diagonal}: {m}")


MM = Op("matmul", {"trans_a": False, "trans_b": False})


@pytest.mark.parametrize("params", [m.params for m in moves(MM)], ids=ident)
def test_every_move_masks_triu(params, tmp_path):
    check("triu", params, tmp_path)


@pytest.mark.parametrize("params", [m.params for m in moves(MM)][::2], ids=ident)
def test_moves_mask_tril(params, tmp_path):
    check("tril", params, tmp_path, diagonals=(0, 3, -140))


@pytest.mark.parametrize("move", [0, 3, 4])
def test_entries_outside_are_zero_even_where_the_products_are_nan(tmp_path, move):
    """torch's triangles write zeros outside, whatever the product holds there: so does the mask, in tiles that run
    their products and in tiles wholly outside that skip them (rows of 64 and 128 tiles, 256 columns)."""
    op = Op("matmul", {"trans_a": False, "trans_b": False, "mask": mask("tril", 0, "diagonal")})
    module = load(render(op, reference("tril", 0), moves(MM)[move].params), tmp_path)
    a, b = torch.randn(64, 5), torch.randn(5, 256)
    a[:, 0] = float("nan")  # every product is NaN; the tril keeps only j <= i
    got = module.ModelNew(0)(a.to(DEVICE), b.to(DEVICE)).cpu()
    assert torch.equal(torch.isnan(got), torch.ones(64, 256).tril().bool()) and torch.all(got.triu(1) == 0.0)


def test_upper_triangular_problem_end_to_end(tmp_path):
    """The upstream spelling (torch.triu(torch.matmul(A, B)) of triangular inputs) with its first move."""
    check_chain(tmp_path, "return torch.triu(torch.matmul(a, b))", "", [[(37, 37), (37, 37)], [(70, 70), (70, 70)]],
                args="a, b", single=True)
