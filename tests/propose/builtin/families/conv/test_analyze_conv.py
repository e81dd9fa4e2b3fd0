"""Convolutions in analyze(): the module and functional spellings, the pointwise epilogue folded into the conv,
and what is declined."""

import pytest

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from tests.propose.builtin.test_analyze import single, write


def test_suite_alexnet_conv_reads_its_module():
    op = analyze(load_problem("level1/conv2d_alexnet")).single
    assert op.kind == "conv2d"
    assert (op.detail["module"], op.detail["weight"], op.detail["bias"]) == ("conv", "conv.weight", "conv.bias")
    assert (op.detail["stride"], op.detail["padding"], op.detail["steps"]) == ([4, 4], [2, 2], [])


def test_epilogue_steps_fold_into_the_conv(tmp_path):
    op = single(tmp_path, "return torch.sigmoid(torch.relu(self.conv(x)) * 2.0)",
                "self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)")
    assert op.kind == "conv2d" and op.detail["steps"] == [["relu"], ["mul", 2.0], ["sigmoid"]]
    assert op.detail["bias"] is None


def test_functional_conv_with_values_and_an_attribute_for_groups(tmp_path):
    op = single(tmp_path, "return F.conv2d(x, self.w, self.b, stride=2, padding=(1, 0), groups=self.g)",
                "self.g = 2\nself.w = nn.Parameter(torch.randn(4, 2, 3, 3))\nself.b = nn.Parameter(torch.randn(4))")
    assert op.kind == "conv2d" and op.detail["module"] is None
    assert (op.detail["stride"], op.detail["padding"], op.detail["groups"], op.detail["groups_attr"]) == \
        ([2, 2], [1, 0], 2, "g")
    assert (op.detail["weight"], op.detail["bias"]) == ("w", "b")


def test_same_padding_becomes_numbers(tmp_path):
    op = single(tmp_path, "return self.conv(x)", "self.conv = nn.Conv2d(3, 4, (3, 5), padding='same')")
    assert op.detail["padding"] == [1, 2]


@pytest.mark.parametrize("forward, init", [
    ("return self.conv(x)", "self.conv = nn.Conv2d(3, 4, 3, padding_mode='reflect', padding=1)"),
    ("return self.conv(x, output_size=[9, 9, 9])", "self.conv = nn.ConvTranspose3d(3, 4, 3)"),
    ("return self.conv(x)", "self.conv = nn.Conv3d(3, 4, 3, padding=1, padding_mode='circular')"),
    ("return self.conv(x, output_size=[17, 17])", "self.conv = nn.ConvTranspose2d(3, 4, 3, stride=2)"),
    ("return F.conv2d(x, torch.ones(4, 3, 3, 3))", ""),
])
def test_declined_convs_are_named(tmp_path, forward, init):
    analysis = analyze(write(tmp_path, forward, init, inputs="[torch.randn(2, 3, 8, 8)]"))
    assert analysis.single is None and analysis.error is None
    assert any(name.startswith("conv") or name == "ones" for name in analysis.unsupported), analysis.unsupported


def test_conv1d_is_a_one_row_conv2d(tmp_path):
    """nn.Conv1d and F.conv1d: kind conv1d, hyper-parameters lifted to [1, s] / [0, p] / [1, d]; pointwise ops
    after it fold into its epilogue."""
    seq = "[torch.randn(2, 3, 50)]"
    op = analyze(write(tmp_path, "return torch.relu(self.conv(x))",
                       "self.conv = nn.Conv1d(3, 4, 5, stride=2, padding=2, dilation=3)", inputs=seq)).single
    assert op.kind == "conv1d" and op.detail["steps"] == [["relu"]]
    assert (op.detail["stride"], op.detail["padding"], op.detail["dilation"]) == ([1, 2], [0, 2], [1, 3])
    op = analyze(write(tmp_path, "return F.conv1d(x, self.w, None, 1, 'same')",
                       "self.w = nn.Parameter(torch.randn(4, 3, 3))", inputs=seq)).single
    assert (op.kind, op.detail["padding"], op.detail["bias"]) == ("conv1d", [0, 1], None)
    assert analyze(load_problem("level1/conv1d")).single.kind == "conv1d"


def test_conv_relu_maxpool_is_one_pooled_conv():
    analysis = analyze(load_problem("level2/conv2d_relu_maxpool"))
    op = analysis.single
    assert op is not None and op.kind == "conv2d" and op.detail["steps"] == [["relu"]]
    assert (op.detail["pool"]["pool"], op.detail["pool"]["kernel"], op.detail["pool"]["stride"]) == \
        ("max", [3, 3], [2, 2])


def test_steps_after_the_pool_are_an_op_of_their_own(tmp_path):
    analysis = analyze(write(tmp_path, "return torch.tanh(self.pool(self.conv(x)))",
                             "self.conv = nn.Conv2d(3, 4, 3)\nself.pool = nn.MaxPool2d(2)",
                             inputs="[torch.randn(2, 3, 8, 8)]"))
    assert analysis.single is None and [op.kind for op in analysis.ops] == ["conv2d", "elementwise"]


def test_a_conv_followed_by_another_op_is_not_single(tmp_path):
    analysis = analyze(write(tmp_path, "return torch.softmax(self.conv(x), dim=1)", "self.conv = nn.Conv2d(3, 4, 3)",
                             inputs="[torch.randn(2, 3, 8, 8)]"))
    assert analysis.single is None and [op.kind for op in analysis.ops] == ["conv2d", "softmax"]
