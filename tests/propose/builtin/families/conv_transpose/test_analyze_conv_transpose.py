"""Transposed convolutions in analyze(): nn.ConvTranspose2d and F.conv_transpose2d (torch's argument order), the
pointwise epilogue folded in, and what is declined, by name."""

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from tests.propose.builtin.test_analyze import write

IMAGE = "[torch.randn(2, 3, 8, 8)]"


def test_suite_transposed_convs_read_their_module():
    for name, steps in (("level1/conv_transpose2d", []), ("level2/conv_transpose2d_tanh", [["tanh"]])):
        op = analyze(load_problem(name)).single
        assert op.kind == "conv_transpose2d" and op.detail["module"] == "conv" and op.detail["steps"] == steps
        assert (op.detail["stride"], op.detail["padding"], op.detail["output_padding"], op.detail["dilation"]) == \
            ([2, 2], [1, 1], [0, 0], [1, 1])


def test_conv_transpose2d_spellings(tmp_path):
    op = analyze(write(tmp_path, "return torch.sigmoid(self.up(x))",
                       "self.up = nn.ConvTranspose2d(3, 4, (3, 2), stride=(2, 3), padding=(1, 0), "
                       "output_padding=(1, 2), groups=1, dilation=(1, 2), bias=False)", inputs=IMAGE)).single
    assert op.kind == "conv_transpose2d" and op.detail["steps"] == [["sigmoid"]] and op.detail["bias"] is None
    assert (op.detail["module"], op.detail["weight"]) == ("up", "up.weight")
    assert (op.detail["stride"], op.detail["padding"], op.detail["output_padding"], op.detail["dilation"]) == \
        ([2, 3], [1, 0], [1, 2], [1, 2])
    # F.conv_transpose2d's order: stride, padding, output_padding, groups, dilation
    op = analyze(write(tmp_path, "return F.conv_transpose2d(x, self.w, None, 2, 1, 1, self.g, 2)",
                       "self.g = 3\nself.w = nn.Parameter(torch.randn(3, 2, 3, 3))", inputs=IMAGE)).single
    assert op.kind == "conv_transpose2d" and op.detail["module"] is None and op.detail["bias"] is None
    assert (op.detail["stride"], op.detail["padding"], op.detail["output_padding"], op.detail["dilation"],
            op.detail["groups"], op.detail["groups_attr"]) == ([2, 2], [1, 1], [1, 1], [2, 2], 3, "g")


def test_transposed_conv_refusals_say_why(tmp_path):
    analysis = analyze(write(tmp_path, "return F.conv_transpose2d(x, self.w, stride=2, output_padding=2)",
                             "self.w = nn.Parameter(torch.randn(3, 2, 3, 3))", inputs=IMAGE))
    assert analysis.single is None and analysis.unsupported == ["conv_transpose2d (output_padding not below stride "
                                                                "or dilation)"]
    analysis = analyze(write(tmp_path, "return self.conv(x, output_size=[17, 17])",
                             "self.conv = nn.ConvTranspose2d(3, 4, 3, stride=2)", inputs=IMAGE))
    assert analysis.unsupported == ["conv_transpose2d (output_size)"]
