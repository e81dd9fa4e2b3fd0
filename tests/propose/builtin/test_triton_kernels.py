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
