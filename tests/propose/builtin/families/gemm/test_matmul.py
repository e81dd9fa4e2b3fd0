"""The GEMM family's matmul: every move (exact and TF32 tiles, 3xTF32 and TF32 fed by TMA, the GEMV kernel, the
16-bit moves) on 2-D, batched, transposed and matrix-vector products of odd sizes against torch; which kernels each
move launches; the suite's matmul problems.

Without a GPU the kernels run in Triton's interpreter (conftest.py)."""

from pathlib import Path

import pytest
import torch

from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.kernel_check import ident, moves, needs_relaxed, render
from tests.propose.builtin.kernel_check import DEVICE, HEAD, assert_no_torch_compute, load

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's NaN/inf notes from the interpreter

LEVEL1 = Path(__file__).resolve().parents[5] / "src" / "kernelcraft" / "problems" / "level1"
# ops of other families: none of their moves needs the relaxed (TF32) tolerance
OTHER_OPS = [Op("elementwise", {"steps": [["relu"]]}), Op("softmax", {"dim": -1}), Op("log_softmax", {"dim": 1}),
             Op("reduce", {"op": "sum", "dim": 1, "dim_attr": None, "keepdim": False}),
             Op("layernorm", {"ndim": 1, "eps": 1e-5, "weight": "ln.weight", "bias": "ln.bias"}),
             Op("rmsnorm", {"eps": 1e-6, "eps_attr": "eps", "weight": "weight"})]

MM = Op("matmul", {"trans_a": False, "trans_b": False})
MM_CASES = {  # (trans_a, trans_b): [(A shape, B shape)], A and B as the reference receives them
    (False, False): [((5, 7), (7, 3)), ((33, 65), (65, 17)), ((1, 1), (1, 1)), ((2, 9, 5), (2, 5, 6)),
                     ((37, 40), (40, 1)), ((3, 0), (0, 4)), ((3, 1500), (1500, 1)), ((2, 9, 5), (2, 5, 2)),
                     ((9, 5), (2, 5, 1)), ((11, 6), (6, 4)), ((11, 6), (6, 5))],
    (True, False): [((7, 5), (7, 3)), ((65, 33), (65, 17)), ((2, 5, 9), (2, 5, 6))],
    (False, True): [((5, 7), (3, 7)), ((2, 9, 5), (2, 6, 5))],
}


def mm_reference(ta: bool, tb: bool) -> str:
    a, b = ("a.transpose(-2, -1)" if ta else "a"), ("b.transpose(-2, -1)" if tb else "b")
    return (HEAD + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
            f"    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n"
            f"        return torch.matmul({a}, {b})\n")


def check_mm(ta, tb, params, cases, tmp_path, dtype=torch.float32, rtol=1e-4, atol=1e-4, ref_src=None):
    op = Op("matmul", {"trans_a": ta, "trans_b": tb})
    source = render(op, ref_src or mm_reference(ta, tb), params)
    assert_no_torch_compute(source)
    assert "torch.matmul" not in source.split("class ModelNew")[1]
    module = load(source, tmp_path)
    for sa, sb in cases:
        torch.manual_seed(0)
        a, b = (torch.randn(s, device=DEVICE).to(dtype) for s in (sa, sb))
        want, got = module.Model()(a, b), module.ModelNew()(a, b)
        assert got.shape == want.shape and got.dtype == want.dtype, (sa, sb, got.shape, want.shape)
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol, msg=lambda m: f"{op} {params} {sa}@{sb}: {m}")


def test_matmul_moves_exact_first_then_tf32():
    ms = moves(MM)
    relaxed = [needs_relaxed(m) for m in ms]
    assert 4 <= len(ms) <= 8 and any(relaxed) and not all(relaxed)
    assert relaxed == sorted(relaxed)  # exact moves first
    for m in ms:
        assert needs_relaxed(m) == (m.params.precision == "tf32")
        assert (m.category == "precision") == (needs_relaxed(m) and not m.params.tma)
        assert ("TF32" in m.text and "tolerance" in m.text) == needs_relaxed(m)
    assert not any(needs_relaxed(m) for op in OTHER_OPS for m in moves(op))


@pytest.mark.parametrize("params", [m.params for m in moves(MM)], ids=ident)
def test_matmul_moves(params, tmp_path):
    for (ta, tb), cases in MM_CASES.items():
        tf32 = params.precision == "tf32"  # inputs rounded to a 10-bit mantissa (on a GPU; exact in the interpreter)
        check_mm(ta, tb, params, cases, tmp_path, rtol=2e-2 if tf32 else 1e-4, atol=2e-2 if tf32 else 1e-4)


@pytest.mark.parametrize("params", [m.params for m in moves(MM)][::3], ids=ident)
def test_matmul_half(params, tmp_path):
    source = render(MM, mm_reference(False, False), params)
    assert 'prec = "ieee"' in source or 'else "ieee"' in source  # half inputs never ask for tf32
    check_mm(False, False, params, [((16, 32), (32, 24)), ((2, 9, 5), (2, 5, 6))], tmp_path, dtype=torch.float16,
             rtol=1e-2, atol=1e-2)


MM16 = Op("matmul", {"trans_a": False, "trans_b": False, "dtype": "float16"})
HALF_CASES = [((5, 7), (7, 3)), ((200, 264), (264, 136)), ((33, 65), (65, 17)), ((2, 9, 5), (2, 5, 6)),
              ((96, 64), (64, 8)), ((3, 0), (0, 4))]  # 200x264 @ 264x136: TMA-aligned rows, no tile multiple


def test_half_matmul_moves_name_what_runs():
    """16-bit inputs get 16-bit moves: no TF32 or 3xTF32 text (those never apply to them), none needs a relaxed
    policy, and the TMA ones read B as it lies."""
    for dtype, dt in (("float16", "fp16"), ("bfloat16", "bf16")):
        ms = moves(Op("matmul", {"trans_a": False, "trans_b": False, "dtype": dtype}))
        assert len(ms) >= 4 and not any(needs_relaxed(m) for m in ms)
        assert all(m.params.precision == "ieee" and "TF32" not in m.text for m in ms)
        assert all(dt in m.text for m in ms if not m.params.gemv)
        assert any(m.params.tma for m in ms) and not any(m.params.b_kmajor for m in ms)
    assert moves(Op("matmul", {"trans_a": False, "trans_b": False, "dtype": "float32"})) == moves(MM)


@pytest.mark.parametrize("params", [m.params for m in moves(MM16)], ids=ident)
def test_half_matmul_moves(params, tmp_path):
    """Every 16-bit move on every operand layout (TMA where a GPU and the operands allow, else the strided kernel),
    fp16 everywhere and bf16 on a GPU, against torch's matmul of the same inputs."""
    dtypes = [torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else [])
    for dtype in dtypes:
        for ta, tb in MM_CASES:
            cases = [((s[1], s[0]) if ta else s, (t[1], t[0]) if tb else t) for s, t in HALF_CASES if len(s) == 2] \
                + [(sa, sb) for sa, sb in HALF_CASES if len(sa) == 3 and not (ta or tb)]
            check_mm(ta, tb, params, cases, tmp_path, dtype=dtype, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("name, shapes", [("matmul_transposed_a", ((65, 33), (65, 17))),
                                          ("bmm", ((3, 9, 5), (3, 5, 6))), ("matvec", ((37, 100), (100, 1)))])
def test_matmul_suite_problems(name, shapes, tmp_path):
    ta = name == "matmul_transposed_a"
    check_mm(ta, False, {}, [shapes], tmp_path, ref_src=(LEVEL1 / f"{name}.py").read_text())


def test_gemv_kernel_only_under_its_move():
    """The matrix-vector kernel is launched only by the move that names it (its text says so), for every operand
    layout; a linear layer has no such move."""
    for ta, tb in MM_CASES:
        op = Op("matmul", {"trans_a": ta, "trans_b": tb})
        for m in moves(op):
            assert ("kc_gemv_kernel[" in render(op, mm_reference(ta, tb), m.params)) == m.params.gemv
            assert ("Matrix-vector" in m.text) == m.params.gemv
    assert [m.params.gemv for m in moves(MM)].count(True) == 1
    assert not any(m.params.gemv for m in moves(Op("linear", {"weight": "w", "bias": None})))


def test_tma_only_where_the_move_asks():
    """A move's flags never leak from the first move's defaults. An fp32 TMA move takes every layout through TMA
    (A.T copied once into (M, K) rows: its descriptor reads row-major rows); a 16-bit one never A.T. B.T, given
    (N, K), is read K-major as it lies (copied only where TMA cannot read it), B (K, N) transposed once."""
    ref = HEAD + "class Model(nn.Module):\n    def forward(self, A, B):\n        return torch.matmul(A, B)\n"
    for dtype in ("float32", "float16"):
        for trans_a in (False, True):
            for trans_b in (False, True):
                op = Op("matmul", {"trans_a": trans_a, "trans_b": trans_b, "dtype": dtype})
                for m in moves(op):
                    src = render(op, ref, m.params)
                    takes = m.params.tma and (not trans_a or m.params.half is None)
                    assert ("kc_matmul_tma(" in src) == takes, (trans_a, trans_b, m.params)
                    assert ("a.mT" in src) == (takes and trans_a)
                    if takes:
                        b = "b" if trans_b or not m.params.b_kmajor else "b.mT"
                        assert f"kc_tma_rows({b})" in src and "b.t().contiguous()" not in src
