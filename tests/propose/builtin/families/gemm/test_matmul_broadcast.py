"""A matmul of A with 3 dims or more and a 2-D B (torch.matmul's broadcast, or an einsum spelling it, as upstream
KernelBench's 3-D and 4-D tensor-matrix products are written): the analysis of each spelling and of the products it
declines, in words; every matmul move against torch on odd shapes (A's rows as one GEMM, a transposed A as a batch
of matrices, few columns on the GEMV kernel, empty and K == 0 products).

Without a GPU the kernels run in Triton's interpreter (conftest.py)."""

import pytest
import torch

from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.families.gemm.recognize import einsum_product
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.families.gemm.test_matmul import check_mm
from tests.propose.builtin.kernel_check import HEAD, ident, moves
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

A3 = "[torch.randn(2, 4, 8), torch.randn(8, 3)]"
A4 = "[torch.randn(2, 3, 4, 8), torch.randn(8, 5)]"


@pytest.mark.parametrize("forward, inputs, trans", [
    ("return torch.matmul(a, b)", A3, (False, False)),
    ("return a @ b", A4, (False, False)),
    ("return a.matmul(b.T)", "[torch.randn(2, 4, 8), torch.randn(3, 8)]", (False, True)),
    ("return a.transpose(-2, -1) @ b", "[torch.randn(2, 8, 4), torch.randn(8, 3)]", (True, False)),
    ("return torch.einsum('bijl,lk->bijk', a, b)", A4, (False, False)),
    ("return torch.einsum('bil,lk->bik', a, b)", A3, (False, False)),
    ("return torch.einsum('...l,lk->...k', a, b)", A4, (False, False)),
    ("return torch.einsum('bijl,kl->bijk', a, b)", "[torch.randn(2, 3, 4, 8), torch.randn(5, 8)]", (False, True)),
    ("return torch.einsum('bli,lk->bik', a, b)", "[torch.randn(2, 8, 4), torch.randn(8, 3)]", (True, False)),
    ("return torch.einsum('ij,jk', [a, b])", "[torch.randn(4, 8), torch.randn(8, 3)]", (False, False)),
    ("return torch.einsum('bij,bjk->bik', a, b)", "[torch.randn(2, 4, 8), torch.randn(2, 8, 3)]", (False, False)),
    ("return torch.einsum('bil,lk->bik', a.mT, b)", "[torch.randn(2, 8, 4), torch.randn(8, 3)]", (True, False)),
])
def test_spellings(tmp_path, forward, inputs, trans):
    problem = write(tmp_path, forward, inputs=inputs, args="a, b")
    analysis = analyze(problem)
    assert analysis.single is not None, analysis
    assert (analysis.single.kind, analysis.single.detail) == \
        ("matmul", {"trans_a": trans[0], "trans_b": trans[1], "dtype": "float32"})
    module = problem.load(small=True)
    a, b = module.get_inputs()
    a_op, b_op = (t.transpose(-2, -1) if flip else t for t, flip in zip((a, b), trans))
    torch.testing.assert_close(module.Model()(a, b), a_op @ b_op)  # the flags mean what the reference computes


@pytest.mark.parametrize("forward, inputs, missing", [
    ("return torch.bmm(a, b)", A3, "matmul"),  # bmm does not broadcast (torch raises)
    ("return a @ b", "[torch.randn(4, 8), torch.randn(2, 8, 3)]", "matmul"),  # B broadcast over A
    ("return torch.einsum('bijl,lk->bjik', a, b)", A4, "einsum 'bijl,lk->bjik' (not one matrix product)"),
    ("return torch.einsum('bjil,jk->bilk', a, b)", "[torch.randn(2, 8, 3, 4), torch.randn(8, 5)]",
     "einsum 'bjil,jk->bilk' (not one matrix product)"),  # contracted over a leading dim of A
    ("return torch.einsum('bij,bj->bi', a, b)", "[torch.randn(2, 4, 8), torch.randn(2, 8)]",
     "einsum 'bij,bj->bi' (not one matrix product)"),
    ("return torch.einsum('ii,ij->ij', a, b)", "[torch.randn(4, 4), torch.randn(4, 3)]",
     "einsum 'ii,ij->ij' (indices that do not name each dim of its operands once)"),
    ("return torch.einsum('ij,jk,kl->il', a, b, b)", "[torch.randn(4, 4), torch.randn(4, 4)]", "einsum"),
    ("return torch.einsum('ij,jk->ik', b, a)", "[torch.randn(4, 4), torch.randn(4, 4)]", "einsum"),  # swapped
    ("return torch.einsum('ij,jk->ik', torch.relu(a), b)", "[torch.randn(4, 4), torch.randn(4, 4)]",
     "einsum (of operands other than the forward's inputs)"),
])
def test_refusals(tmp_path, forward, inputs, missing):
    analysis = analyze(write(tmp_path, forward, inputs=inputs, args="a, b"))
    assert analysis.single is None and analysis.error is None and missing in analysis.unsupported, analysis


@pytest.mark.parametrize("equation, ranks, want", [
    ("bijl,lk->bijk", (4, 2), (False, False)), ("b i j l, l k -> b i j k", (4, 2), (False, False)),
    ("...l,lk->...k", (2, 2), (False, False)), ("...lm,lk->...mk", (5, 2), (True, False)),
    ("ij,kj->ik", (2, 2), (False, True)), ("ji,kj->ik", (2, 2), (True, True)),
    ("bij,bkj->bik", (3, 3), (False, True)), ("il,lk", (2, 2), (False, False)),
    ("bij,jk", (3, 2), (False, False)), ("bijl,jk->bilk", (4, 2), (True, False)),
    ("ij,jk,kl->il", (2, 2), "einsum of 3 operands"),
    ("bij,cjk->bcik", (3, 3), "einsum 'bij,cjk->bcik' (not one matrix product)"),
    ("...l,...lk->...k", (3, 3), "einsum '...l,...lk->...k' (an ellipsis other than A's leading dims)"),
    ("...l,lk->k...", (3, 2), "einsum '...l,lk->k...' (A's leading dims not kept in front)"),
    ("bijl,lk->bijk", (3, 2), "einsum 'bijl,lk->bijk' (indices that do not name each dim of its operands once)"),
])
def test_einsum_equations(equation, ranks, want):
    assert einsum_product(equation, ranks) == want


def test_an_implicit_output_is_sorted_like_torch():
    """Without "->", torch's output is the indices used once in alphabetical order: "bij,jk" is "bik", a product;
    "kij,ja" is "aik", which puts B's column first: not one."""
    a, b = torch.randn(2, 4, 8), torch.randn(8, 3)
    assert torch.einsum("bij,jk", a, b).shape == (2, 4, 3) and torch.einsum("kij,ja", a, b).shape == (3, 4, 2)
    assert einsum_product("bij,jk", (3, 2)) == (False, False)
    assert einsum_product("kij,ja", (3, 2)) == "einsum 'kij,ja' (not one matrix product)"


MM = Op("matmul", {"trans_a": False, "trans_b": False})
CASES = {  # (trans_a, trans_b): [(A shape, B shape)] as the reference receives them
    (False, False): [((2, 5, 7), (7, 9)), ((3, 2, 4, 6), (6, 11)), ((2, 6, 5), (5, 3)), ((1, 1, 1), (1, 1)),
                     ((2, 3, 0), (0, 4)), ((2, 0, 5), (5, 3)), ((3, 33, 17), (17, 20))],
    (True, False): [((2, 7, 5), (7, 9)), ((2, 2, 6, 5), (6, 3))],
    (False, True): [((2, 5, 7), (9, 7)), ((2, 3, 4, 6), (11, 6))],
}


def reference(ta: bool, tb: bool) -> str:
    a, b = ("a.transpose(-2, -1)" if ta else "a"), ("b.T" if tb else "b")
    return (HEAD + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
            f"    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n"
            f"        return torch.matmul({a}, {b})\n")


@pytest.mark.parametrize("params", [m.params for m in moves(MM)], ids=ident)
def test_every_move(params, tmp_path):
    tol = 2e-2 if params.precision == "tf32" and torch.cuda.is_available() else 1e-4
    for (ta, tb), cases in CASES.items():
        check_mm(ta, tb, params, cases, tmp_path, rtol=tol, atol=tol, ref_src=reference(ta, tb))


def test_a_contiguous_a_is_not_copied(tmp_path):
    """A's leading dims are flattened by a reshape, a view of a contiguous A: the kernel reads A's own storage."""
    from tests.propose.builtin.kernel_check import DEVICE, load, render

    source = render(MM, reference(False, False), moves(MM)[1].params)
    assert "a = a.reshape(c.shape[0], K)" in source
    module = load(source, tmp_path)
    a, b = torch.randn(3, 5, 7, device=DEVICE), torch.randn(7, 6, device=DEVICE)
    torch.testing.assert_close(module.ModelNew()(a, b), a @ b, rtol=1e-4, atol=1e-4)
    assert a.reshape(-1, 7).data_ptr() == a.data_ptr()
