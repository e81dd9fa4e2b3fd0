"""3-D convolutions in analyze(): nn.Conv3d and F.conv3d, the pointwise epilogue folded in, and what is declined."""

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from tests.propose.builtin.test_analyze import write

VOLUME = "[torch.randn(2, 3, 5, 6, 7)]"


def test_suite_conv3d_reads_its_module():
    op = analyze(load_problem("level1/conv3d")).single
    assert op.kind == "conv3d" and (op.detail["module"], op.detail["weight"], op.detail["bias"]) == \
        ("conv", "conv.weight", "conv.bias")
    assert (op.detail["stride"], op.detail["padding"], op.detail["dilation"]) == ([1, 1, 1], [0, 0, 0], [1, 1, 1])


def test_conv3d_relu_mean_is_conv3d_with_relu_then_a_mean():
    analysis = analyze(load_problem("level2/conv3d_relu_mean"))
    assert [op.kind for op in analysis.ops] == ["conv3d", "reduce"] and analysis.single is None
    assert analysis.ops[0].detail["steps"] == [["relu"]] and analysis.ops[1].detail["dim"] == 2


def test_conv3d_spellings(tmp_path):
    op = analyze(write(tmp_path, "return F.gelu(self.conv(x)) * 2.0",
                       "self.conv = nn.Conv3d(3, 4, (3, 1, 5), dilation=(1, 2, 2), padding='same', bias=False)",
                       inputs=VOLUME)).single
    assert op.kind == "conv3d" and op.detail["steps"] == [["gelu"], ["mul", 2.0]] and op.detail["bias"] is None
    assert (op.detail["dilation"], op.detail["padding"]) == ([1, 2, 2], [1, 0, 4])
    op = analyze(write(tmp_path, "return F.conv3d(x, self.w, self.b, 2, (1, 0, 1), dilation=(1, 1, 2), groups=self.g)",
                       "self.g = 3\nself.w = nn.Parameter(torch.randn(6, 1, 3, 3, 3))\n"
                       "self.b = nn.Parameter(torch.randn(6))", inputs=VOLUME)).single
    assert op.kind == "conv3d" and op.detail["module"] is None
    assert (op.detail["stride"], op.detail["padding"], op.detail["dilation"], op.detail["groups"],
            op.detail["groups_attr"], op.detail["weight"], op.detail["bias"]) == \
        ([2, 2, 2], [1, 0, 1], [1, 1, 2], 3, "g", "w", "b")


def test_conv3d_refusals_say_why(tmp_path):
    analysis = analyze(write(tmp_path, "return self.conv(x)", "self.conv = nn.Conv3d(3, 4, 3, padding_mode='reflect')",
                             inputs=VOLUME))
    assert analysis.unsupported == ["conv3d (padding_mode=reflect)"]
