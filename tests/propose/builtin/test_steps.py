"""Activations of several statements (mish, selu, hardsigmoid, hardswish, softsign): each as an elementwise step and in
a conv's and a linear's epilogue, read from every spelling (F., torch., nn. modules) and compared with torch at
several shapes; dropout modules, the identity in eval mode; steps that read the chain's own earlier value (x * f(x)),
kept where they read it, in every family that applies steps. Without a GPU in Triton's interpreter (conftest.py)."""

import pytest
import torch

from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Op, is_own
from kernelcraft.propose.builtin.steps import epilogue_lines, step_lines
from tests.propose.builtin.kernel_check import moves, render
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import DEVICE, check, load, reference
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

ACTIVATIONS = {"mish": "F.mish(x)", "selu": "torch.selu(x)", "hardsigmoid": "F.hardsigmoid(x)",
               "hardswish": "F.hardswish(x)", "softsign": "F.softsign(x)"}
SHAPES = [(3, 257), (2, 3, 130), (150001,), (1, 1)]


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_step(name, tmp_path):
    for scale in (1.0, 8.0):  # 8: the saturated ends (hardsigmoid's 0 and 1, mish's softplus threshold)
        check(Op("elementwise", {"steps": [[name]]}), reference(ACTIVATIONS[name]), {},
              [((), s, scale) for s in SHAPES], tmp_path)


@pytest.mark.parametrize("name", ["mish", "selu", "hardswish"])
def test_small_and_extreme_inputs(name, tmp_path):
    """Near zero the result keeps its relative digits (mish and selu go through tanh and expm1 forms that would
    cancel); far out, no overflow to NaN; NaN stays NaN. Compared with float64 torch."""
    module = load(render(Op("elementwise", {"steps": [[name]]}), reference("x"), {}), tmp_path)
    torch.manual_seed(0)
    x = torch.cat([torch.randn(3000) * 1e-4, torch.randn(3000) * 3e-2, torch.randn(3000) * 3,
                   torch.tensor([0.0, -0.0, 19.9, 20.1, -30.0, 80.0, -80.0, 3.0, -3.0])]).to(DEVICE)
    got = module.ModelNew()(x).double()
    want = eval(ACTIVATIONS[name], {"torch": torch, "F": torch.nn.functional, "x": x.double()})
    torch.testing.assert_close(got, want, rtol=2e-6, atol=1e-30)
    assert module.ModelNew()(torch.tensor([float("nan")], device=DEVICE)).isnan().all()


MODULES = {"mish": "nn.Mish()", "selu": "nn.SELU()", "hardsigmoid": "nn.Hardsigmoid()", "hardswish": "nn.Hardswish()",
           "softsign": "nn.Softsign()"}


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_every_spelling_is_one_step(name, tmp_path):
    spellings = [ACTIVATIONS[name], "self.act(x)"] + (["F.selu(x)"] if name == "selu" else [])
    for forward in spellings:
        analysis = analyze(write(tmp_path, f"return {forward}", f"self.act = {MODULES[name]}"))
        assert analysis.single is not None, (forward, analysis)
        assert analysis.single.kind == "elementwise" and analysis.single.detail["steps"] == [[name]]


def test_dropout_modules_are_the_identity_in_eval(tmp_path):
    init = "self.fc = nn.Linear(8, 6)\nself.drop = nn.Dropout(0.3)\nself.drop3 = nn.AlphaDropout(0.5)"
    analysis = analyze(write(tmp_path, "return torch.softmax(self.drop3(self.drop(self.fc(x))), dim=1)", init))
    assert [op.kind for op in analysis.chain] == ["linear", "softmax"], analysis
    analysis = analyze(write(tmp_path, "return F.dropout(x, 0.3)"))  # the functional form drops in any mode
    assert analysis.single is None and "dropout" in analysis.unsupported


@pytest.mark.parametrize("forward,init,cases", [
    ("return F.mish(F.mish(self.fc(x)))", "self.fc = nn.Linear(37, 19)", [[(5, 37)], [(3, 2, 37)]]),
    ("return F.hardswish(self.drop(self.fc(x)) - 0.5)", "self.fc = nn.Linear(20, 33)\nself.drop = nn.Dropout(0.2)",
     [[(4, 20)], [(1, 20)]]),
    ("return torch.tanh(self.act(self.conv(x)))", "self.conv = nn.Conv2d(3, 5, 3)\nself.act = nn.Mish()",
     [[(2, 3, 9, 11)], [(1, 3, 6, 5)]]),
    ("return torch.relu(F.hardswish(self.conv(x)))", "self.conv = nn.Conv2d(4, 6, 3, padding=1)",
     [[(2, 4, 7, 7)], [(1, 4, 5, 9)]]),
    ("return F.selu(self.conv(x) * 2.0)", "self.conv = nn.Conv3d(2, 3, 3)", [[(1, 2, 5, 6, 7)], [(2, 2, 4, 4, 4)]]),
], ids=["linear-mish-mish", "linear-dropout-hardswish", "conv-mish-tanh", "conv-hardswish-relu", "conv3d-selu"])
def test_in_epilogues(forward, init, cases, tmp_path):
    ops, _ = check_chain(tmp_path, forward, init, cases, single=True)
    assert ops[0].kind in ("linear", "conv2d", "conv3d") and ops[0].detail["steps"]


def test_own_values_are_kept_where_a_step_reads_them():
    lines = step_lines([["relu"], ["tmul", ("step", 1)], ["tadd", ("step", 0)], ["tsub", ("step", 3)]])
    assert lines == ["x_step0 = x", "x = tl.where(x < 0.0, 0.0, x)", "x_step1 = x", "x = x * x_step1",
                     "x = x + x_step0", "x_step3 = x", "x = x - x_step3"]
    assert epilogue_lines([["tadd", ("attr", "b")], ["tmul", ("step", 0)]], lambda k: f"load({k})") == [
        "o0 = load(0)", "x_step0 = x", "x = x + o0", "x = x * x_step0"]
    with pytest.raises(ValueError, match="need a family that loads them"):
        step_lines([["tadd", ("attr", "b")]])


NORM = "y = torch.tanh(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w)"
OWN = {  # the op whose epilogue reads its own values -> (forward, __init__, input shapes, forward's args)
    "conv2d": ("y = torch.relu(self.conv(x))\nreturn y * torch.clamp((y + 3) / 6, 0, 1)",
               "self.conv = nn.Conv2d(3, 4, 3)", [[(2, 3, 7, 6)], [(3, 5, 5)]], "x"),
    "conv2d-depthwise": ("y = self.conv(x)\nreturn torch.tanh(y) * 0.5 + y",
                         "self.conv = nn.Conv2d(4, 4, 3, groups=4)", [[(2, 4, 7, 6)], [(4, 5, 5)]], "x"),
    "conv1d": ("y = self.conv(x) * 2.0\nreturn y - torch.sigmoid(y)", "self.conv = nn.Conv1d(3, 4, 3)",
               [[(2, 3, 9)], [(3, 5)]], "x"),
    "conv3d": ("y = self.conv(x)\nreturn y * torch.tanh(F.softplus(y))", "self.conv = nn.Conv3d(2, 3, 2)",
               [[(2, 2, 4, 3, 5)], [(2, 3, 3, 2)]], "x"),
    "conv_transpose2d": ("y = self.conv(x) + self.b\nreturn y * F.hardswish(y)",
                         "self.conv = nn.ConvTranspose2d(3, 4, 3, stride=2)\n"
                         "self.b = nn.Parameter(torch.randn(4, 1, 1))", [[(2, 3, 4, 5)], [(3, 3, 2)]], "x"),
    "conv_transpose3d": ("y = self.conv(x)\nreturn torch.sigmoid(y) * y + y",
                         "self.conv = nn.ConvTranspose3d(2, 3, 2, stride=2)", [[(2, 2, 2, 3, 2)], [(2, 1, 2, 3)]], "x"),
    "linear": ("y = self.fc(x)\nreturn torch.clamp(y + y, -1.0, 1.0) * y", "self.fc = nn.Linear(9, 7)",
               [[(5, 9)], [(9,)], [(2, 3, 9)]], "x"),
    "matmul": ("y = a @ b\nreturn torch.relu(y) * y", "", [[(5, 9), (9, 7)], [(5, 9), (9, 1)], [(2, 3, 9), (2, 9, 4)]],
               "a, b"),
    "groupnorm": ("y = self.gn(x)\nreturn y + y", "self.gn = nn.GroupNorm(2, 4)", [[(2, 4, 3, 5)], [(3, 4, 7)]], "x"),
    "batchnorm": ("y = self.bn(x)\nreturn torch.tanh(y) * y", "self.bn = nn.BatchNorm2d(4)", [[(2, 4, 3, 5)]], "x"),
    "instancenorm": ("y = self.norm(x)\nreturn y * torch.sigmoid(y * 2.0)", "self.norm = nn.InstanceNorm2d(4)",
                     [[(2, 4, 3, 5)]], "x"),
    "layernorm": ("y = self.ln(x)\nreturn torch.maximum(y, torch.tanh(y))", "self.ln = nn.LayerNorm(8)",
                  [[(3, 8)], [(2, 5, 8)]], "x"),
    "rmsnorm": (f"{NORM}\nreturn y - torch.relu(y)", "self.w = nn.Parameter(torch.randn(8))",
                [[(3, 8)], [(2, 5, 8)]], "x"),
    "elementwise": ("return torch.exp(x) / x", "", [[(3, 7)], [(5,)]], "x"),
    "elementwise-broadcast": ("y = x + z\nreturn y - torch.tanh(y)", "", [[(3, 7), (7,)], [(2, 1, 5), (4, 1)]],
                              "x, z"),
}


@pytest.mark.parametrize("name", OWN)
def test_own_values_in_every_family_that_applies_steps(name, tmp_path):
    """x (op) f(x): one op whose steps read its own earlier value, in each family's epilogue (or elementwise
    kernel, flat and broadcast), against the reference."""
    forward, init, cases, args = OWN[name]
    ops, _ = check_chain(tmp_path, forward, init, cases, args=args, single=name != "elementwise-broadcast")
    assert len(ops) == 1 and ops[0].kind == name.split("-")[0], ops
    assert any(is_own(s[1]) for s in ops[0].detail["steps"] if s[0].startswith("t") and s[0] != "tanh")


def test_own_values_under_the_gemv_move(tmp_path):
    forward, init, _, args = OWN["matmul"]
    move = next(i for i, m in enumerate(moves(Op("matmul", {"dtype": "float32"}))) if m.params.gemv)
    check_chain(tmp_path, forward, init, [[(5, 9), (9, 1)], [(3, 9), (9, 2)]], args=args, move=move, single=True)
