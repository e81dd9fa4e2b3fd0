"""Activations of several statements (mish, selu, hardsigmoid, hardswish, softsign): each as an elementwise step and in
a conv's and a linear's epilogue, read from every spelling (F., torch., nn. modules) and compared with torch at
several shapes; dropout modules, the identity in eval mode. Without a GPU in Triton's interpreter (conftest.py)."""

import pytest
import torch

from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.kernel_check import render
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
