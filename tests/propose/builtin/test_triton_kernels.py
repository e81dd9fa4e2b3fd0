"""The built-in engineer's Triton kernel family: every move of every kind, rendered and run against torch.

Without a GPU the kernels run in Triton's interpreter (conftest.py).
Shapes are small but awkward: non-powers-of-two, odd tails, 1-element dims, reductions over the first and
middle dims, rows long enough to take the tiled / online / split paths.
"""

import json
from pathlib import Path

import pytest
import torch

from kernelcraft.propose.base import CATEGORIES
from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.kernel_check import ident, moves, needs_relaxed, render
from tests.propose.builtin.kernel_check import DEVICE, HEAD, assert_no_torch_compute, check, load, reference

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's NaN/inf notes from the interpreter

LEVEL1 = Path(__file__).resolve().parents[3] / "src" / "kernelcraft" / "problems" / "level1"


# ---------------------------------------------------------------- the move lists

ALL_OPS = [Op("elementwise", {"steps": [["relu"]]}), Op("softmax", {"dim": -1}), Op("log_softmax", {"dim": 1}),
           Op("reduce", {"op": "sum", "dim": 1, "dim_attr": None, "keepdim": False}),
           Op("layernorm", {"ndim": 1, "eps": 1e-5, "weight": "ln.weight", "bias": "ln.bias"}),
           Op("rmsnorm", {"eps": 1e-6, "eps_attr": "eps", "weight": "weight"}),
           Op("matmul", {"trans_a": False, "trans_b": False})]


@pytest.mark.parametrize("op", ALL_OPS, ids=lambda op: op.kind)
def test_moves_are_distinct_categorized_and_json(op):
    ms = moves(op)
    assert 3 <= len(ms) <= 8
    assert len({m.text for m in ms}) == len(ms)
    assert len({json.dumps(m.params.to_json(), sort_keys=True) for m in ms}) == len(ms)
    assert all(m.category in CATEGORIES for m in ms)
    assert [json.loads(json.dumps(m.params.to_json())) for m in ms] == [m.params.to_json() for m in ms]


def test_unknown_kind_and_step_are_refused():
    assert moves(Op("conv_transpose3d_", {})) == []
    with pytest.raises(ValueError):
        registry.family_for("conv_transpose3d_")
    with pytest.raises(ValueError):
        render(Op("elementwise", {"steps": [["cosh"]]}), reference("torch.cosh(x)"), {})


# ---------------------------------------------------------------- elementwise

CHAIN = Op("elementwise", {"steps": [["gelu"], ["mul", 1.5], ["sub", 0.25], ["clamp", -0.1, None]]})
CHAIN_REF = reference("torch.clamp(F.gelu(x) * 1.5 - 0.25, min=-0.1)")
POINTWISE_SHAPES = [(3, 17), (5, 1000), (2, 3, 130), (1, 1), (150001,)]


@pytest.mark.parametrize("params", [m.params for m in moves(CHAIN)], ids=ident)
def test_elementwise_moves(params, tmp_path):
    check(CHAIN, CHAIN_REF, params, [((), s) for s in POINTWISE_SHAPES], tmp_path)


STEPS = [  # (steps, torch expression of x, input scale)
    ([["relu"]], "torch.relu(x)", 1), ([["sigmoid"]], "torch.sigmoid(x)", 30), ([["tanh"]], "torch.tanh(x)", 30),
    ([["silu"]], "F.silu(x)", 30), ([["gelu"]], "F.gelu(x)", 5), ([["gelu_tanh"]], "F.gelu(x, approximate='tanh')", 5),
    ([["exp"]], "torch.exp(x)", 3), ([["abs"], ["add", 0.1], ["log"]], "torch.log(x.abs() + 0.1)", 1),
    ([["neg"]], "-x", 1), ([["abs"], ["sqrt"]], "torch.sqrt(x.abs())", 1),
    ([["abs"], ["add", 0.5], ["rsqrt"]], "torch.rsqrt(x.abs() + 0.5)", 1), ([["square"]], "torch.square(x)", 1),
    ([["elu", 0.7]], "F.elu(x, alpha=0.7)", 3), ([["leaky_relu", 0.03]], "F.leaky_relu(x, 0.03)", 1),
    ([["hardtanh", -0.5, 0.8]], "F.hardtanh(x, -0.5, 0.8)", 1), ([["clamp", None, 0.2]], "torch.clamp(x, max=0.2)", 1),
    ([["clamp", -0.3, 0.2]], "torch.clamp(x, -0.3, 0.2)", 1),
    ([["softplus", 2.0, 3.0]], "F.softplus(x, beta=2.0, threshold=3.0)", 5),
    ([["softplus", 1.0, 20.0]], "F.softplus(x)", 40), ([["add", 0.5]], "x + 0.5", 1), ([["sub", 0.5]], "x - 0.5", 1),
    ([["rsub", 0.5]], "0.5 - x", 1), ([["mul", 3.0]], "x * 3.0", 1), ([["div", 3.0]], "x / 3.0", 1),
    ([["abs"], ["add", 0.5], ["rdiv", 2.0]], "2.0 / (x.abs() + 0.5)", 1),
    ([["pow", 2.0]], "torch.pow(x, 2.0)", 1), ([["pow", 3.0]], "x ** 3", 1), ([["pow", 0.0]], "torch.pow(x, 0.0)", 1),
    ([["pow", 4.0]], "torch.pow(x, 4.0)", 2), ([["pow", 5.0]], "torch.pow(x, 5.0)", 2),
    ([["pow", -1.0]], "torch.pow(x, -1.0)", 1), ([["abs"], ["pow", 1.5]], "torch.pow(x.abs(), 1.5)", 2),
    ([["abs"], ["add", 0.5], ["pow", -2.5]], "torch.pow(x.abs() + 0.5, -2.5)", 1),
]


@pytest.mark.parametrize("steps,expr,scale", STEPS, ids=[s[1] for s in STEPS])
def test_elementwise_steps(steps, expr, scale, tmp_path):
    check(Op("elementwise", {"steps": steps}), reference(expr), {}, [((), (3, 257), scale)], tmp_path)


def test_elementwise_half(tmp_path):
    check(CHAIN, CHAIN_REF, {}, [((), (5, 1000))], tmp_path, rtol=2e-3, atol=2e-3, dtype=torch.float16)


# ---------------------------------------------------------------- the suite's own level1 problems

SUITE = {  # problem: (op, init args, input shape)
    "relu": (Op("elementwise", {"steps": [["relu"]]}), (), (37, 1000)),
    "gelu": (Op("elementwise", {"steps": [["gelu"]]}), (), (37, 1000)),
    "elu": (Op("elementwise", {"steps": [["elu", 1.0]]}), (1.0,), (37, 1000)),
}


@pytest.mark.parametrize("name", list(SUITE))
def test_suite_problems(name, tmp_path):
    op, init, shape = SUITE[name]
    check(op, (LEVEL1 / f"{name}.py").read_text(), moves(op)[0].params, [(init, shape)], tmp_path, rtol=1e-4,
          atol=1e-4)


# ---------------------------------------------------------------- matmul

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
        assert needs_relaxed(m) == (m.params["precision"] == "tf32")
        assert (m.category == "precision") == (needs_relaxed(m) and not m.params.get("tma"))
        assert ("TF32" in m.text and "tolerance" in m.text) == needs_relaxed(m)
    assert not any(needs_relaxed(m) for op in ALL_OPS[:-1] for m in moves(op))


@pytest.mark.parametrize("params", [m.params for m in moves(MM)], ids=ident)
def test_matmul_moves(params, tmp_path):
    for (ta, tb), cases in MM_CASES.items():
        tf32 = params["precision"] == "tf32"  # inputs rounded to a 10-bit mantissa (on a GPU; exact in the interpreter)
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
        assert all(m.params["precision"] == "ieee" and "TF32" not in m.text for m in ms)
        assert all(dt in m.text for m in ms if not m.params["gemv"])
        assert any(m.params["tma"] for m in ms) and not any(m.params["b_kmajor"] for m in ms)
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
            assert ("kc_gemv_kernel[" in render(op, mm_reference(ta, tb), m.params)) == m.params["gemv"]
            assert ("Matrix-vector" in m.text) == m.params["gemv"]
    assert [m.params["gemv"] for m in moves(MM)].count(True) == 1
    assert not any(m.params.get("gemv") for m in moves(Op("linear", {"weight": "w", "bias": None})))


def test_tma_only_where_the_move_asks_and_the_operands_are_untransposed():
    """A move's flags never leak from the first move's defaults, and A.T / B.T never go through TMA (its
    descriptors read the untransposed row-major matrices)."""
    ref = HEAD + "class Model(nn.Module):\n    def forward(self, A, B):\n        return torch.matmul(A, B)\n"
    for trans_a in (False, True):
        op = Op("matmul", {"trans_a": trans_a, "trans_b": False})
        for m in moves(op):
            src = render(op, ref, m.params)
            assert ("kc_matmul_tma(" in src) == (bool(m.params["tma"]) and not trans_a), (trans_a, m.params)


@pytest.mark.parametrize("steps,fn", [([["tanh"]], torch.tanh), ([["elu", 1.3]], lambda x: torch.nn.functional.elu(x, 1.3)),
                                      ([["tanh"], ["mul", 2.0]], lambda x: torch.tanh(x) * 2.0)])
def test_small_inputs_keep_their_relative_accuracy(steps, fn, tmp_path):
    """tanh and elu near zero: closed forms such as 1 - 2 / (exp(2x) + 1) lose a small result's digits (1e-3 relative
    at 1e-4); the verifier's small-scale trial sees it. Compared with float64 torch, relative, no absolute slack."""
    module = load(render(Op("elementwise", {"steps": steps}), reference("x"), {}), tmp_path)
    torch.manual_seed(0)
    x = torch.cat([torch.randn(3000) * 1e-4, torch.randn(3000) * 3e-2, torch.randn(3000),
                   torch.tensor([0.0, -0.0, 0.0624, -0.0626, 20.0, -20.0])]).to(DEVICE)
    got = module.ModelNew()(x).double()
    want = fn(x.double())
    torch.testing.assert_close(got, want, rtol=2e-6, atol=0.0)
    assert module.ModelNew()(torch.tensor([float("nan")], device=DEVICE)).isnan().all()
