"""The norm family (layernorm, rmsnorm): every move, rendered and run against torch on rows that fit in registers
and rows long enough to take the split path, row groups sized for L2, pointwise epilogues on both paths, half
inputs, the suite's own problems, and an rmsnorm over a dim that is not the last (its columns kernel). Without a GPU
in Triton's interpreter (conftest.py)."""

from pathlib import Path

import pytest
import torch

from kernelcraft.propose.builtin.families.norm import Rows
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import DEVICE, check, ident, load, moves, reference, render

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's NaN/inf notes from the interpreter

LEVEL1 = Path(__file__).resolve().parents[5] / "src" / "kernelcraft" / "problems" / "level1"
LN = Op("layernorm", {"ndim": 1, "eps": 1e-5, "weight": "ln.weight", "bias": "ln.bias"})
RMS = Op("rmsnorm", {"eps": 1e-6, "eps_attr": "eps", "weight": "weight"})


def test_moves_are_typed_and_their_ideas_follow_the_parameters():
    ln, rms = moves(LN), moves(RMS)
    assert all(isinstance(m.params, Rows) for m in ln + rms)
    assert [m.params for m in ln if m.params.welford] == [m.params for m in rms]  # two-pass: layernorm's alone
    assert [m.category for m in ln if not m.params.welford] == ["precision"]
    assert sum(m.params.l2_groups for m in ln) == 1
    assert all(str(m.params.BLOCK_N) in m.text for m in ln if not m.params.split_target)


def test_render_keeps_the_reference_signature_and_reads_module_values(tmp_path):
    src = reference("x / self.eps", "self, eps", "self.eps = eps").replace("forward(self, x: torch.Tensor)",
                                                                           "forward(self, inp, *rest)")
    out = render(Op("rmsnorm", {"eps": 1e-6, "eps_attr": "eps", "weight": "blocks.0.norm"}), src, {})
    assert "def forward(self, inp, *rest) -> torch.Tensor:" in out and "x = inp.contiguous()" in out
    assert "float(self.eps)" in out and "self.blocks[0].norm" in out


# ---------------------------------------------------------------- layernorm / rmsnorm

LN_AFFINE = reference("self.ln(x)", "self, shape", "self.ln = nn.LayerNorm(shape)\nwith torch.no_grad():\n"
                      "    self.ln.weight.normal_()\n    self.ln.bias.normal_()")
LN_PLAIN = reference("self.ln(x)", "self, shape", "self.ln = nn.LayerNorm(shape, elementwise_affine=False)")
LN_CASES = [(1, True, [((17,), (3, 17)), ((1,), (1, 1)), ((20000,), (2, 20000))]),
            (3, True, [((3, 5, 7), (2, 3, 5, 7))]),
            (1, False, [((130,), (4, 130))]), (2, False, [((3, 7000), (2, 3, 7000), 3.0)])]


@pytest.mark.parametrize("params", [m.params for m in moves(LN)], ids=ident)
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
    op = LN if kind == "layernorm" else Op("rmsnorm", {"eps": 1e-6, "eps_attr": None, "weight": None})
    params = next(m.params for m in moves(op) if m.params.l2_groups)
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


@pytest.mark.parametrize("params", [m.params for m in moves(RMS)], ids=ident)
def test_rmsnorm_moves(params, tmp_path):
    check(RMS, RMS_W, params, [((130, 1e-6), (2, 37, 130)), ((1, 1e-6), (1, 1)), ((20000, 1e-6), (2, 20000))],
          tmp_path, rtol=1e-4, atol=1e-4)
    check(Op("rmsnorm", {"eps": 1e-5, "eps_attr": None, "weight": None}), RMS_PLAIN, params,
          [((), (3, 17)), ((), (5, 1000)), ((), (2, 17000))], tmp_path, rtol=1e-4, atol=1e-4)


def test_norms_half(tmp_path):
    check(LN, LN_AFFINE, {}, [((300,), (5, 300))], tmp_path, rtol=1e-2, atol=1e-2, dtype=torch.float16)


# ---------------------------------------------------------------- epilogues

@pytest.mark.parametrize("params", [m.params for m in moves(LN)][:4:3], ids=ident)
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


# ---------------------------------------------------------------- the suite's own level1 problems

SUITE = {  # problem: (op, init args, input shape)
    "layernorm": (Op("layernorm", {"ndim": 3, "eps": 1e-5, "weight": "ln.weight", "bias": "ln.bias"}),
                  ((5, 13, 17),), (3, 5, 13, 17)),
    "rmsnorm": (RMS, (130, 1e-6), (2, 37, 130)),
}


@pytest.mark.parametrize("name", list(SUITE))
def test_suite_problems(name, tmp_path):
    op, init, shape = SUITE[name]
    check(op, (LEVEL1 / f"{name}.py").read_text(), moves(op)[0].params, [(init, shape)], tmp_path, rtol=1e-4,
          atol=1e-4)


# ---------------------------------------------------------------- rmsnorm over a dim that is not the last

RMS_DIM1 = reference("x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)", "self, eps",
                     "self.eps = eps")
COLUMN_CASES = [((1e-5,), (3, 5, 7, 9)), ((1e-5,), (2, 64, 33)), ((1e-5,), (1, 1, 1)), ((1e-5,), (2, 3000, 5)),
                ((1e-5,), (4, 7)), ((1e-5,), (3, 5, 0))]


@pytest.mark.parametrize("params", [m.params for m in moves(RMS)], ids=ident)
def test_rmsnorm_over_a_middle_dim_every_move(params, tmp_path):
    """Columns of R elements inner apart: in registers (short R) or re-read (R 3000), odd sizes, a 2-D input whose
    dim 1 is its last (the rows path), an empty one."""
    op = Op("rmsnorm", {"eps": 1e-5, "eps_attr": "eps", "weight": None, "dim": 1, "dim_attr": None})
    check(op, RMS_DIM1, params, COLUMN_CASES, tmp_path, rtol=1e-4, atol=1e-4)


def test_rmsnorm_over_a_middle_dim_is_one_norm_and_runs(tmp_path):
    """KernelBench's spelling (x / sqrt(mean(x ** 2, dim=1) + eps)) is one rmsnorm over dim 1, not a reduction and a
    division; a weight after it is a tensor step (it broadcasts by torch's rules), an activation after that an
    elementwise op, and a dim read from the module is read from it."""
    ops, _ = check_chain(tmp_path, "return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)",
                         "self.eps = 1e-5", [[(3, 5, 7, 9)], [(2, 64, 33)], [(4, 7)]], single=True)
    assert ops[0].kind == "rmsnorm" and ops[0].detail["dim"] == 1 and ops[0].detail["eps_attr"] == "eps"
    ops, source = check_chain(
        tmp_path, "return torch.relu(x * torch.rsqrt(x.pow(2).mean(self.dim, keepdim=True) + 1e-6) * self.w)",
        "self.dim = 2\nself.w = nn.Parameter(torch.randn(6, 1))", [[(2, 3, 6, 5)], [(1, 2, 6, 1)], [(4, 1, 6, 2)]])
    assert [o.kind for o in ops] == ["rmsnorm", "elementwise"] and ops[0].detail["dim_attr"] == "dim"
    assert "dim = (self.dim) %" in source
