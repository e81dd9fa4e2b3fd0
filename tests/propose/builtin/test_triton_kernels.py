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
from tests.propose.builtin.kernel_check import ident, moves, render
from tests.propose.builtin.kernel_check import DEVICE, check, load, reference

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


def test_render_keeps_the_reference_signature_and_reads_module_values(tmp_path):
    src = reference("x / self.eps", "self, eps", "self.eps = eps").replace("forward(self, x: torch.Tensor)",
                                                                           "forward(self, inp, *rest)")
    out = render(Op("rmsnorm", {"eps": 1e-6, "eps_attr": "eps", "weight": "blocks.0.norm"}), src, {})
    assert "def forward(self, inp, *rest) -> torch.Tensor:" in out and "x = inp.contiguous()" in out
    assert "float(self.eps)" in out and "self.blocks[0].norm" in out


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


# ---------------------------------------------------------------- softmax / log_softmax

SOFTMAX_CASES = {-1: [(3, 17), (1, 1), (2, 20000)], 1: [(5, 1000), (2, 3, 130)], 0: [(7, 5), (2500, 3)]}
SOFTMAX_MOVES = [(kind, m.params) for kind in ("softmax", "log_softmax") for m in moves(Op(kind, {"dim": 1}))]


@pytest.mark.parametrize("kind,params", SOFTMAX_MOVES, ids=lambda v: v if isinstance(v, str) else ident(v))
def test_softmax_moves(kind, params, tmp_path):
    for dim, shapes in SOFTMAX_CASES.items():
        check(Op(kind, {"dim": dim}), reference(f"torch.{kind}(x, dim={dim})"), params, [((), s) for s in shapes],
              tmp_path)


def test_softmax_half_and_extreme_rows(tmp_path):
    check(Op("softmax", {"dim": -1}), reference("torch.softmax(x, dim=-1)"), {}, [((), (4, 333))], tmp_path,
          rtol=2e-3, atol=2e-3, dtype=torch.float16)
    for params in (moves(Op("softmax", {"dim": -1}))[0].params, {"variant": "online", "BLOCK_R": 64}):
        check(Op("log_softmax", {"dim": -1}), reference("torch.log_softmax(x, dim=-1)"), params,
              [((), (3, 300), 1000.0)], tmp_path, rtol=1e-5, atol=1e-3)


# ---------------------------------------------------------------- reduce

TORCH_REDUCE = {"sum": "torch.sum", "mean": "torch.mean", "max": "torch.amax", "min": "torch.amin"}
REDUCE_CASES = [  # (op, keepdim, dim, shapes)
    ("sum", False, -1, [(3, 17), (2, 3, 130), (1, 1)]), ("mean", True, 1, [(5, 1000), (2, 37, 5), (4, 3000, 2)]),
    ("max", False, 0, [(7, 5), (3000, 3), (1,)]), ("min", True, 1, [(2, 3, 130), (2, 1, 3)]),
    ("sum", False, None, [(5, 1000), (1, 1)]), ("mean", True, None, [(3, 17)]),
]


@pytest.mark.parametrize("params", [m.params for m in moves(ALL_OPS[3])], ids=ident)
def test_reduce_moves(params, tmp_path):
    for name, keep, dim, shapes in REDUCE_CASES:
        ref = reference(f"{TORCH_REDUCE[name]}(x, dim=self.dim, keepdim={keep})", "self, dim", "self.dim = dim")
        op = Op("reduce", {"op": name, "dim": None, "dim_attr": "dim", "keepdim": keep})
        check(op, ref, params, [((dim,), s) for s in shapes], tmp_path)


def test_reduce_constant_dim_and_values_of_max(tmp_path):
    op = Op("reduce", {"op": "max", "dim": 1, "dim_attr": None, "keepdim": False})
    check(op, reference("torch.max(x, dim=1).values"), {}, [((), (3, 130, 37)), ((), (2, 1))], tmp_path)


# ---------------------------------------------------------------- layernorm / rmsnorm

LN_AFFINE = reference("self.ln(x)", "self, shape", "self.ln = nn.LayerNorm(shape)\nwith torch.no_grad():\n"
                      "    self.ln.weight.normal_()\n    self.ln.bias.normal_()")
LN_PLAIN = reference("self.ln(x)", "self, shape", "self.ln = nn.LayerNorm(shape, elementwise_affine=False)")
LN_CASES = [(1, True, [((17,), (3, 17)), ((1,), (1, 1)), ((20000,), (2, 20000))]),
            (3, True, [((3, 5, 7), (2, 3, 5, 7))]),
            (1, False, [((130,), (4, 130))]), (2, False, [((3, 7000), (2, 3, 7000), 3.0)])]


@pytest.mark.parametrize("params", [m.params for m in moves(ALL_OPS[4])], ids=ident)
def test_layernorm_moves(params, tmp_path):
    for ndim, affine, cases in LN_CASES:
        detail = {"ndim": ndim, "eps": 1e-5, "weight": "ln.weight" if affine else None,
                  "bias": "ln.bias" if affine else None}
        check(Op("layernorm", detail), LN_AFFINE if affine else LN_PLAIN, params,
              [((shape,), x, *s) for shape, x, *s in cases], tmp_path, rtol=1e-4, atol=1e-4)


RMS_W = reference("x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight",
                  "self, hidden, eps", "self.eps = eps\nself.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))")
RMS_PLAIN = reference("x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-5)")




@pytest.mark.parametrize("kind", ["layernorm", "rmsnorm"])
def test_norm_row_groups_sized_for_l2(kind, tmp_path):
    """The L2-group move normalizes a few rows per launch pair; a small stated L2 forces several groups."""
    op = Op("layernorm", {"ndim": 1, "eps": 1e-5, "weight": "ln.weight", "bias": "ln.bias"}) if kind == "layernorm" \
        else Op("rmsnorm", {"eps": 1e-6, "eps_attr": None, "weight": None})
    params = next(m.params for m in moves(op) if m.params.get("l2_groups"))
    ref = reference("self.ln(x)", "self, n", "self.ln = nn.LayerNorm(n)") if kind == "layernorm" else \
        reference("x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)", "self, n")
    module = load(render(op, ref, params), tmp_path)
    module.KC_L2_BYTES = 3 * 4 * 20000 * 2  # two rows of 20000 floats per group
    for shape in [(5, 20000), (3, 2, 17001)]:
        torch.manual_seed(0)
        want_model, got_model = module.Model(shape[-1]), module.ModelNew(shape[-1])
        got_model.load_state_dict(want_model.state_dict())
        x = torch.randn(shape, device=DEVICE)
        torch.testing.assert_close(got_model.to(DEVICE)(x), want_model.to(DEVICE)(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("params", [m.params for m in moves(ALL_OPS[5])], ids=ident)
def test_rmsnorm_moves(params, tmp_path):
    check(Op("rmsnorm", {"eps": 1e-6, "eps_attr": "eps", "weight": "weight"}), RMS_W, params,
          [((130, 1e-6), (2, 37, 130)), ((1, 1e-6), (1, 1)), ((20000, 1e-6), (2, 20000))], tmp_path, rtol=1e-4,
          atol=1e-4)
    check(Op("rmsnorm", {"eps": 1e-5, "eps_attr": None, "weight": None}), RMS_PLAIN, params,
          [((), (3, 17)), ((), (5, 1000)), ((), (2, 17000))], tmp_path, rtol=1e-4, atol=1e-4)


def test_norms_half(tmp_path):
    check(Op("layernorm", {"ndim": 1, "eps": 1e-5, "weight": "ln.weight", "bias": "ln.bias"}), LN_AFFINE, {},
          [((300,), (5, 300))], tmp_path, rtol=1e-2, atol=1e-2, dtype=torch.float16)


# ---------------------------------------------------------------- the suite's own level1 problems

SUITE = {  # problem: (op, init args, input shape)
    "relu": (Op("elementwise", {"steps": [["relu"]]}), (), (37, 1000)),
    "gelu": (Op("elementwise", {"steps": [["gelu"]]}), (), (37, 1000)),
    "elu": (Op("elementwise", {"steps": [["elu", 1.0]]}), (1.0,), (37, 1000)),
    "softmax": (Op("softmax", {"dim": 1}), (), (37, 1000)),
    "log_softmax": (Op("log_softmax", {"dim": 1}), (), (37, 1000)),
    "layernorm": (Op("layernorm", {"ndim": 3, "eps": 1e-5, "weight": "ln.weight", "bias": "ln.bias"}),
                  ((5, 13, 17),), (3, 5, 13, 17)),
    "rmsnorm": (Op("rmsnorm", {"eps": 1e-6, "eps_attr": "eps", "weight": "weight"}), (130, 1e-6), (2, 37, 130)),
    "sum_dim": (Op("reduce", {"op": "sum", "dim": None, "dim_attr": "dim", "keepdim": False}), (-1,), (3, 37, 130)),
    "mean_dim": (Op("reduce", {"op": "mean", "dim": None, "dim_attr": "dim", "keepdim": False}), (1,), (3, 130, 37)),
    "max_dim": (Op("reduce", {"op": "max", "dim": None, "dim_attr": "dim", "keepdim": False}), (1,), (3, 130, 37)),
}


@pytest.mark.parametrize("name", list(SUITE))
def test_suite_problems(name, tmp_path):
    op, init, shape = SUITE[name]
    check(op, (LEVEL1 / f"{name}.py").read_text(), moves(op)[0].params, [(init, shape)], tmp_path, rtol=1e-4,
          atol=1e-4)


@pytest.mark.parametrize("params", [m.params for m in moves(ALL_OPS[4])][:4:3], ids=ident)
def test_norm_epilogue_steps(params, tmp_path):
    """Pointwise ops after a norm run on its fp32 output before the one store, on the row and split paths."""
    op = Op("layernorm", {"ndim": 1, "eps": 1e-5, "weight": "ln.weight", "bias": "ln.bias",
                          "steps": [["gelu"], ["mul", 0.5]]})
    ref = reference("F.gelu(self.ln(x)) * 0.5", "self, n", "self.ln = nn.LayerNorm(n)")
    check(op, ref, params, [((37,), (5, 37)), ((20000,), (3, 20000))], tmp_path)
    rms = Op("rmsnorm", {"eps": 1e-6, "eps_attr": None, "weight": None, "steps": [["tanh"]]})
    check(rms, reference("torch.tanh(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))", "self, n"), params,
          [((37,), (5, 37)), ((20000,), (2, 20000))], tmp_path)


def test_layernorm_gelu_is_one_norm_with_an_epilogue():
    from kernelcraft.problems import load_problem
    from kernelcraft.propose.builtin.analyze import analyze

    op = analyze(load_problem("level2/layernorm_gelu")).single
    assert op.kind == "layernorm" and op.detail["steps"] == [["gelu"]]


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
