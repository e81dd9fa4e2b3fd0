"""What analyze() reads as a chain: each op names the value it reads; tensor operands of elementwise steps (in
either order); free views; and the rule that an op takes pointwise steps into its epilogue (or a pooling after
it) only when no value still to be read needs its result without them."""

import pytest

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from tests.propose.builtin.test_analyze import write

LINEAR = "self.fc = nn.Linear(8, 8)"


def ops(tmp_path, forward, init="", inputs="[torch.randn(4, 8)]", args="x"):
    analysis = analyze(write(tmp_path, forward, init, inputs=inputs, args=args))
    assert analysis.chain is not None and analysis.error is None, analysis
    return [(op.kind, op.src, op.detail.get("steps")) for op in analysis.chain]


def test_level2_chains_name_what_each_op_reads():
    def read(name):
        return [(op.kind, op.src) for op in analyze(load_problem(f"level2/{name}")).chain]
    assert read("bmm_scale_softmax") == [("matmul", "x"), ("softmax", 0)]
    assert read("rmsnorm_linear") == [("rmsnorm", "x"), ("linear", 0)]
    assert read("gemm_groupnorm_swish") == [("linear", "x"), ("groupnorm", 0)]
    assert analyze(load_problem("level2/gemm_groupnorm_swish")).chain[1].detail["steps"] == [["silu"]]
    assert read("swish_add") == [("elementwise", "x")]
    op = analyze(load_problem("level2/gemm_relu_add_bias")).single
    assert op.kind == "linear" and op.detail["steps"] == [["relu"], ["tadd", ("attr", "bias")]]
    ops_ = analyze(load_problem("level2/conv2d_gelu_global_avgpool")).chain
    assert ops_[0].detail["steps"] == [["gelu"]] and ops_[0].detail["pool"]["pool"] == "adaptive_avg"
    assert (ops_[1].kind, ops_[1].detail) == ("view", {"flatten": [1, -1]})


@pytest.mark.parametrize("forward, steps", [
    ("return x + y", [["tadd", ("input", 1)]]),
    ("return y - x", [["tsub", "x"]]),  # neither leads: the left one reads, the right one is the operand
    ("return x / y", [["tdiv", ("input", 1)]]),
    ("return torch.relu(y) / x", [["relu"], ["tdiv", "x"]]),  # the chain with steps leads
    ("return x * self.w", [["tmul", ("attr", "w")]]),
    ("return self.w * torch.exp(x)", [["exp"], ["tmul", ("attr", "w")]]),
    ("return self.w - x * 2.0", [["mul", 2.0], ["trsub", ("attr", "w")]]),
    ("return torch.add(x, y).sub(self.w)", [["tadd", ("input", 1)], ["tsub", ("attr", "w")]]),
])
def test_tensor_operands(tmp_path, forward, steps):
    got = ops(tmp_path, forward, "self.w = nn.Parameter(torch.randn(8))", "[torch.randn(4, 8), torch.randn(4, 8)]",
              "x, y")
    assert got[-1][2] == steps


def test_the_latest_op_leads_and_an_operand_with_steps_is_emitted_first(tmp_path):
    assert ops(tmp_path, "return x + self.fc(x)", LINEAR) == [("linear", "x", []), ("elementwise", 0, [["tadd", "x"]])]
    assert ops(tmp_path, "return self.fc(x) - torch.relu(x)", LINEAR) == [
        ("linear", "x", []), ("elementwise", "x", [["relu"]]), ("elementwise", 0, [["tsub", 1]])]


@pytest.mark.parametrize("forward, want", [
    # relu folds into the linear: softmax and the add both read it through relu
    ("y = torch.relu(self.fc(x))\nreturn torch.softmax(y, -1) + y",
     [("linear", "x", [["relu"]]), ("softmax", 0, None), ("elementwise", 1, [["tadd", 0]])]),
    # the raw result is read again: no fold
    ("y = self.fc(x)\nreturn torch.relu(y) + torch.softmax(y, -1)",
     [("linear", "x", []), ("softmax", 0, None), ("elementwise", 0, [["relu"]]), ("elementwise", 1, [["tadd", 2]])]),
    ("y = self.fc(x)\nreturn torch.softmax(torch.relu(y), -1) * y",
     [("linear", "x", []), ("elementwise", 0, [["relu"]]), ("softmax", 1, None), ("elementwise", 2, [["tmul", 0]])]),
    # the other value read later shares the folded steps and goes on from there
    ("y = torch.relu(self.fc(x))\nreturn torch.softmax(y, -1) * (y * 2.0)",
     [("linear", "x", [["relu"]]), ("softmax", 0, None), ("elementwise", 0, [["mul", 2.0]]),
      ("elementwise", 1, [["tmul", 2]])]),
    # steps before a tensor operand fold, the rest is an elementwise op
    ("return torch.sigmoid(torch.relu(self.fc(x)) + x)",
     [("linear", "x", [["relu"]]), ("elementwise", 0, [["tadd", "x"], ["sigmoid"]])]),
])
def test_epilogues_fold_only_where_nothing_needs_the_raw_result(tmp_path, forward, want):
    assert ops(tmp_path, forward, LINEAR) == want


def test_ops_whose_result_is_thrown_away_are_dropped(tmp_path):
    op = analyze(write(tmp_path, "t = torch.softmax(x * 2.0, -1)\nreturn x * 2.0")).single
    assert (op.kind, op.detail) == ("elementwise", {"steps": [["mul", 2.0]]})
    assert ops(tmp_path, "t = torch.relu(self.fc(x))\nu = t.sum()\nreturn torch.softmax(t * 3.0, -1) + x", LINEAR) \
        == [("linear", "x", [["relu"]]), ("elementwise", 0, [["mul", 3.0]]), ("softmax", 1, None),
            ("elementwise", 2, [["tadd", "x"]])]  # the sum is dropped, the ops after it renumbered
    analysis = analyze(write(tmp_path, "t = torch.softmax(x, -1)\nreturn x"))
    assert analysis.ops == [] and analysis.chain is None


def test_a_pool_folds_into_the_conv_only_when_its_result_is_not_read_again(tmp_path):
    x4 = "[torch.randn(2, 3, 8, 8)]"
    conv = "self.conv = nn.Conv2d(3, 4, 3)\nself.pool = nn.MaxPool2d(2)"
    got = analyze(write(tmp_path, "return self.pool(torch.relu(self.conv(x)))", conv, x4)).single
    assert got.detail["steps"] == [["relu"]] and got.detail["pool"]["pool"] == "max"
    got = ops(tmp_path, "y = torch.relu(self.conv(x))\nreturn self.pool(y).sum() + y.sum()", conv, x4)
    assert [k for k, _, _ in got][:3] == ["conv2d", "pool2d", "reduce"] and got[1][1] == 0


@pytest.mark.parametrize("forward, detail", [
    ("return x.flatten(1) * 2.0", {"flatten": [1, -1]}),
    ("return torch.flatten(x, start_dim=1, end_dim=2) * 2.0", {"flatten": [1, 2]}),
    ("return self.f(x) * 2.0", {"flatten": [1, -1]}),
    ("return x.view(-1, 4) * 2.0", {"shape": [-1, 4]}),
    ("return x.reshape((2, -1)) * 2.0", {"shape": [2, -1]}),
    ("return torch.reshape(x, (4, 2, 12)) * 2.0", {"shape": [4, 2, 12]}),
])
def test_views(tmp_path, forward, detail):
    analysis = analyze(write(tmp_path, forward, "self.f = nn.Flatten()", "[torch.randn(4, 2, 3, 4)]"))
    assert [(op.kind, op.src) for op in analysis.chain] == [("view", "x"), ("elementwise", 0)]
    assert analysis.chain[0].detail == detail


@pytest.mark.parametrize("forward, missing", [
    ("return x.view(x.size(0) * 2, -1) * 2.0", "view"),  # a size computed from a size
    ("return x.view(torch.float16)", "view"),
    ("v, i = torch.max(x, 1)\nreturn v * i", "elementwise of argmax indices"),
    ("return torch.argmax(x, 1) * 2.0", "elementwise of argmax indices"),
    ("return self.w + self.w", "add"),  # no tensor of the forward's
])
def test_refused(tmp_path, forward, missing):
    analysis = analyze(write(tmp_path, forward, "self.w = nn.Parameter(torch.randn(8))", "[torch.randn(4, 8)]"))
    assert analysis.chain is None and analysis.single is None and missing in analysis.unsupported, analysis
