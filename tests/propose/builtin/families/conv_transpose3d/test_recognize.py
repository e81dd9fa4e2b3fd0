"""Transposed 3-D convs in analyze(): nn.ConvTranspose3d (hyper-parameters read from the module at run time),
F.conv_transpose3d and torch.conv_transpose3d in torch's argument order or by keyword, the pointwise ops after them
folded into the epilogue, and what is refused, in words."""

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.analyze import analyze
from tests.propose.builtin.test_analyze import write

VOLUME = "[torch.randn(2, 3, 4, 5, 6)]"


def hyper(op) -> tuple:
    d = op.detail
    return d["stride"], d["padding"], d["output_padding"], d["dilation"]


def test_the_family_claims_the_module_and_both_functions():
    import torch
    import torch.nn.functional as F

    recognizer = registry.family_for("conv_transpose3d").recognize
    assert torch.nn.ConvTranspose3d in recognizer.modules
    assert {F.conv_transpose3d, torch.conv_transpose3d} <= set(recognizer.functions)
    assert "conv_transpose3d" in registry.epilogue_kinds() and "conv_transpose3d" in \
        registry.operand_epilogue_kinds()


def test_the_suite_problem_reads_its_module():
    op = analyze(load_problem("level1/conv_transpose3d")).single
    assert op.kind == "conv_transpose3d" and op.src == "x"
    assert (op.detail["module"], op.detail["weight"], op.detail["bias"], op.detail["steps"]) == \
        ("conv", "conv.weight", "conv.bias", [])
    assert hyper(op) == ([2, 2, 2], [1, 1, 1], [1, 1, 1], [1, 1, 1])
    assert (op.detail["groups"], op.detail["groups_attr"]) == (1, None)


def test_module_with_asymmetric_hyper_parameters_and_an_epilogue(tmp_path):
    analysis = analyze(write(tmp_path, "return torch.sigmoid(self.up(x)) * 2.0 - 1.0",
                             "self.up = nn.ConvTranspose3d(3, 4, (3, 2, 1), stride=(2, 3, 1), padding=(1, 0, 0), "
                             "output_padding=(1, 2, 0), dilation=(1, 2, 1), groups=1, bias=False)", inputs=VOLUME))
    op = analysis.single
    assert op is not None and op.kind == "conv_transpose3d", analysis
    assert op.detail["steps"] == [["sigmoid"], ["mul", 2.0], ["sub", 1.0]]
    assert (op.detail["module"], op.detail["weight"], op.detail["bias"]) == ("up", "up.weight", None)
    assert hyper(op) == ([2, 3, 1], [1, 0, 0], [1, 2, 0], [1, 2, 1])


def test_functional_spellings_positional_and_by_keyword(tmp_path):
    # F.conv_transpose3d's order: weight, bias, stride, padding, output_padding, groups, dilation
    op = analyze(write(tmp_path, "return torch.relu(F.conv_transpose3d(x, self.w, self.b, 2, 1, 1, self.g, 2))",
                       "self.g = 3\nself.w = nn.Parameter(torch.randn(3, 2, 3, 3, 3))\n"
                       "self.b = nn.Parameter(torch.randn(6))", inputs=VOLUME)).single
    assert op.kind == "conv_transpose3d" and op.detail["module"] is None and op.detail["steps"] == [["relu"]]
    assert hyper(op) == ([2, 2, 2], [1, 1, 1], [1, 1, 1], [2, 2, 2])
    assert (op.detail["groups"], op.detail["groups_attr"], op.detail["weight"], op.detail["bias"]) == (3, "g", "w", "b")
    op = analyze(write(tmp_path, "return torch.conv_transpose3d(x, self.w, stride=(1, 2, 3), padding=(0, 1, 0), "
                                 "dilation=(2, 1, 1))",
                       "self.register_buffer('w', torch.randn(3, 4, 2, 3, 2))", inputs=VOLUME)).single
    assert op.kind == "conv_transpose3d" and (op.detail["weight"], op.detail["bias"]) == ("w", None)
    assert hyper(op) == ([1, 2, 3], [0, 1, 0], [0, 0, 0], [2, 1, 1]) and op.detail["groups"] == 1


def test_a_reduction_after_it_is_an_op_of_its_own_and_a_parameter_operand_folds(tmp_path):
    analysis = analyze(write(tmp_path, "return torch.tanh(self.up(x)).mean(dim=2, keepdim=True)",
                             "self.up = nn.ConvTranspose3d(3, 4, 3, stride=2)", inputs=VOLUME))
    assert [op.kind for op in analysis.chain] == ["conv_transpose3d", "reduce"]
    assert analysis.ops[0].detail["steps"] == [["tanh"]]
    analysis = analyze(write(tmp_path, "return self.up(x) * 0.5 + self.bias",
                             "self.up = nn.ConvTranspose3d(3, 4, 3, stride=2)\n"
                             "self.bias = nn.Parameter(torch.randn(4, 1, 1, 1))", inputs=VOLUME))
    assert analysis.single is not None and analysis.single.kind == "conv_transpose3d", analysis
    assert analysis.single.detail["steps"] == [["mul", 0.5], ["tadd", ("attr", "bias")]]


def test_refusals_say_why(tmp_path):
    cases = [
        ("return self.up(x, output_size=[9, 11, 13])", "self.up = nn.ConvTranspose3d(3, 4, 3, stride=2)",
         "conv_transpose3d (output_size)"),
        ("return self.up(x)", "self.up = nn.ConvTranspose3d(3, 4, 3)\nself.up.padding_mode = 'reflect'",
         "conv_transpose3d (padding_mode=reflect)"),
        ("return F.conv_transpose3d(x, self.w, stride=2, output_padding=(0, 2, 0))",
         "self.w = nn.Parameter(torch.randn(3, 2, 3, 3, 3))",
         "conv_transpose3d (output_padding not below stride or dilation)"),
        ("return F.conv_transpose3d(x, self.w[:, :2])", "self.w = nn.Parameter(torch.randn(3, 4, 3, 3, 3))",
         "conv_transpose3d"),  # a weight computed in forward, not one the module holds
        ("return F.conv_transpose3d(x, self.w)", "self.w = nn.Parameter(torch.randn(3, 4, 3, 3))",
         "conv_transpose3d"),  # a 2-D weight
    ]
    for forward, init, reason in cases:
        analysis = analyze(write(tmp_path, forward, init, inputs=VOLUME))
        assert analysis.single is None and analysis.chain is None, (forward, analysis)
        assert reason in analysis.unsupported, (forward, analysis.unsupported)
