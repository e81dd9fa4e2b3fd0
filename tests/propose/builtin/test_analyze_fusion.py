"""Fusion: the pointwise steps after a producer op (conv, transposed conv, linear, norm, softmax) read as its epilogue,
parameter operands included, consecutive elementwise ops read as one, and x (op) f(x) as one chain reading its own
earlier value, so fewer full passes over big intermediates remain. Small references, analysed and run against the
reference; then upstream KernelBench level 2: each problem's analysis as `kind[steps]` per op, a few of them end to
end through the built-in engineer's first answer, against the reference at their small (derived) sizes."""

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin import chain
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Op, merge_elementwise
from tests.helpers import KERNELBENCH
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import DEVICE, check_first_answer, load
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
needs_kernelbench = pytest.mark.skipif(not KERNELBENCH.exists(), reason=f"no KernelBench copy at {KERNELBENCH}")


def test_consecutive_elementwise_ops_run_as_one_kernel(tmp_path):
    """Two elementwise ops, the first read only as the second's src (as an IR can hold them), merged: one kernel,
    the steps concatenated, operands of both broadcast (a forward input, a parameter)."""
    problem = write(tmp_path, "return torch.sigmoid(torch.relu(x + y) * 2.0 * self.w)",
                    "self.w = nn.Parameter(torch.randn(7))", "[torch.randn(3, 5, 7), torch.randn(5, 1)]", "x, y")
    ops = merge_elementwise([Op("elementwise", {"steps": [["tadd", ("input", 1)], ["relu"]]}),
                             Op("elementwise", {"steps": [["mul", 2.0], ["tmul", ("attr", "w")], ["sigmoid"]]}, 0)])
    assert [(op.kind, op.src) for op in ops] == [("elementwise", "x")] and len(ops[0].detail["steps"]) == 5
    source = chain.render(ops, problem.source)
    assert source.count("[(programs,)](") == 1  # one launch
    module = load(source, tmp_path)
    torch.manual_seed(0)
    ref, new = module.Model().to(DEVICE), module.ModelNew().to(DEVICE)
    new.load_state_dict(ref.state_dict())
    for shapes in [((3, 5, 7), (5, 1)), ((2, 1, 7), (4, 1)), ((7,), ())]:
        x, y = (torch.randn(s, device=DEVICE) for s in shapes)
        with torch.no_grad():
            torch.testing.assert_close(new(x, y), ref(x, y), rtol=1e-5, atol=1e-5)


FOLD_LATE = ("a = torch.relu(self.fc(x) + self.b)\nb = torch.softmax(y, 1)\nreturn b * a",
             "self.fc = nn.Linear(9, 6)\nself.b = nn.Parameter(torch.randn(6))")


def test_an_operand_emitted_mid_expression_folds_into_its_producer_once_nothing_else_reads_it(tmp_path):
    """relu(fc(x) + b) is emitted as the operand of b * a before its last reader is seen (the fold waits); at the
    end the linear's result is read by it alone, so its steps fold into the linear's epilogue."""
    ops, source = check_chain(tmp_path, *FOLD_LATE, [[(4, 9), (4, 6)], [(1, 9), (1, 6)], [(2, 3, 9), (2, 3, 6)]],
                              args="x, y")
    assert [(op.kind, op.src, op.detail.get("steps")) for op in ops] == [
        ("linear", "x", [["tadd", ("attr", "b")], ["relu"]]), ("softmax", ("input", 1), None),
        ("elementwise", 1, [["tmul", 0]])]
    assert "kc_column_args" in source


@pytest.mark.parametrize("forward", [
    "a = self.fc(x)\nb = torch.softmax(y, 1)\nreturn b * torch.relu(a) + a",  # the raw linear read again
    "a = torch.relu(self.fc(x))\nb = torch.softmax(y, 1)\nreturn b * a + y * a",  # the operand read twice
    "a = self.fc(x) * y\nb = torch.softmax(y, 1)\nreturn b * a",  # an operand the linear does not read
])
def test_no_late_fold_where_something_else_needs_the_raw_result(tmp_path, forward):
    analysis = analyze(write(tmp_path, forward, FOLD_LATE[1], "[torch.randn(4, 9), torch.randn(4, 6)]", "x, y"))
    assert analysis.chain is not None and analysis.chain[0].kind == "linear", analysis
    assert not analysis.chain[0].detail["steps"]

FC = "self.fc = nn.Linear(8, 6)"
ROWS = [[(4, 8)], [(1, 8)], [(2, 3, 8)]]


@pytest.mark.parametrize("forward, init, want", [
    ("y = self.fc(x) * 2.0\nreturn torch.clamp(y + y, -1, 1)", FC,  # x + x
     [("linear", "x", [["mul", 2.0], ["tadd", ("step", 1)], ["clamp", -1.0, 1.0]])]),
    ("y = self.fc(x)\nz = y.clone().detach()\nreturn torch.sigmoid(y) * 0.5 + z", FC,  # a residual of the raw result
     [("linear", "x", [["sigmoid"], ["mul", 0.5], ["tadd", ("step", 0)]])]),
    ("y = torch.exp(x) + 1.0\nreturn y - torch.tanh(y)", "",  # the longer chain leads: y - f(y) is f(y) rsub y
     [("elementwise", "x", [["exp"], ["add", 1.0], ["tanh"], ["trsub", ("step", 2)]])]),
    ("y = self.ln(x)\nreturn (torch.sigmoid(y) + self.b) * y",  # the layernorm would take sigmoid, but not the rest,
     "self.ln = nn.LayerNorm(8)\nself.b = nn.Parameter(torch.randn(8))",  # which reads its raw result: no fold
     [("layernorm", "x", None), ("elementwise", 0, [["sigmoid"], ["tadd", ("attr", "b")], ["tmul", ("step", 0)]])]),
    ("y = torch.relu(self.fc(x))\nt = y * torch.tanh(y)\nreturn torch.softmax(y, -1) * t", FC,  # t rebased past relu
     [("linear", "x", [["relu"]]), ("softmax", 0, None), ("elementwise", 0, [["tanh"], ["tmul", ("step", 0)]]),
      ("elementwise", 1, [["tmul", 2]])]),
    ("y = self.fc(x)\nz = torch.relu(y)\nt = torch.tanh(z) * y\nreturn torch.softmax(z, -1) * t", FC,  # t reads the
     [("linear", "x", []), ("elementwise", 0, [["relu"]]), ("softmax", 1, None),  # raw result: relu does not fold
      ("elementwise", 0, [["relu"], ["tanh"], ["tmul", ("step", 0)]]), ("elementwise", 2, [["tmul", 3]])]),
])
def test_x_op_f_of_x_reads_x_as_its_own_value(tmp_path, forward, init, want):
    ops, _ = check_chain(tmp_path, forward, init, ROWS, single=len(want) == 1)
    assert [(op.kind, op.src, op.detail.get("steps")) for op in ops] == want


LEVEL2 = KERNELBENCH / "level2"

FUSED = {  # problem -> its ops, each as kind[its steps' names]
    # parameter operands in the epilogue of a conv3d, a transposed conv (2-D, 3-D)
    "2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide": "conv_transpose2d[tadd,clamp,mul,clamp,div]",
    "3_ConvTranspose3d_Sum_LayerNorm_AvgPool_GELU":
        "conv_transpose3d[tadd] -> layernorm -> pool3d -> elementwise[gelu]",
    "5_ConvTranspose2d_Subtract_Tanh": "conv_transpose2d[tsub,tanh]",
    "7_Conv3d_ReLU_LeakyReLU_GELU_Sigmoid_BiasAdd": "conv3d[relu,leaky_relu,gelu,sigmoid,tadd]",
    "48_Conv3d_Scaling_Tanh_Multiply_Sigmoid": "conv3d[tmul,tanh,tmul,sigmoid]",
    "50_ConvTranspose3d_Scaling_AvgPool_BiasAdd_Scaling":
        "conv_transpose3d[tmul] -> pool3d -> elementwise[tadd,tmul]",
    "74_ConvTranspose3d_LeakyReLU_Multiply_LeakyReLU_Max": "conv_transpose3d[leaky_relu,tmul,leaky_relu] -> pool3d",
    "79_Conv3d_Multiply_InstanceNorm_Clamp_Multiply_Max": "conv3d[tmul] -> instancenorm[clamp,tmul] -> reduce",
    "90_Conv3d_LeakyReLU_Sum_Clamp_GELU": "conv3d[leaky_relu,tadd,clamp,gelu]",
    # a linear's parameter operands of one value (a 0-dim nn.Parameter) or one per column
    "68_Matmul_Min_Subtract": "linear[tmin,tsub]",
    # x (op) f(x): the chain's own earlier value, no second op (x * hardswish(x), x + x, a clone's residual)
    "20_ConvTranspose3d_Sum_ResidualAdd_Multiply_ResidualAdd": "conv_transpose3d[tadd,tadd,tmul,tadd]",
    "22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish": "linear[mul,tadd,clamp] -> reduce -> elementwise[mish,tmul]",
    "26_ConvTranspose3d_Add_HardSwish": "conv_transpose3d -> elementwise[tadd,hardswish,tmul]",
    "40_Matmul_Scaling_ResidualAdd": "linear[mul,tadd]",
    "52_Conv2d_Activation_BatchNorm": "conv2d[softplus,tanh,tmul] -> batchnorm",
    "57_Conv2d_ReLU_HardSwish": "conv2d[relu,add,div,clamp,tmul]",
    "62_Matmul_GroupNorm_LeakyReLU_Sum": "linear -> groupnorm[leaky_relu,tadd]",
    "70_Gemm_Sigmoid_Scaling_ResidualAdd": "linear[sigmoid,mul,tadd]",
    "88_Gemm_GroupNorm_Swish_Multiply_Swish": "linear -> groupnorm[silu,tmul,sigmoid,tmul]",
    # parameter operands in the epilogue of a channel norm or a softmax
    "84_Gemm_BatchNorm_Scaling_Softmax": "linear -> batchnorm[tmul] -> softmax",
    "85_Conv2d_GroupNorm_Scale_MaxPool_Clamp": "conv2d -> groupnorm[tmul] -> pool2d -> elementwise[clamp]",
    "97_Matmul_BatchNorm_BiasAdd_Divide_Swish": "linear -> batchnorm[tadd,div,silu]",
    "91_ConvTranspose2d_Softmax_BiasAdd_Scaling_Sigmoid": "conv_transpose2d -> softmax[tadd,mul,sigmoid]",
    "49_ConvTranspose3d_Softmax_Sigmoid": "conv_transpose3d -> softmax[sigmoid]",
    "13_ConvTranspose3d_Mean_Add_Softmax_Tanh_Scaling":
        "conv_transpose3d -> reduce -> elementwise[tadd] -> softmax[tanh,mul]",
    # a view of a parameter (self.subtract.view(1, -1, 1, 1, 1)) as an operand
    "89_ConvTranspose3d_MaxPool_Softmax_Subtract_Swish_Max": "conv_transpose3d -> pool3d -> softmax[tsub,silu] -> reduce",
}


def chain_text(ops) -> str:
    return " -> ".join(op.kind + (f"[{','.join(s[0] for s in op.detail['steps'])}]" if op.detail.get("steps")
                                  else "") for op in ops)


def upstream(name: str):
    return load_problem(LEVEL2 / f"{name}.py")


@needs_kernelbench
@pytest.mark.parametrize("name", sorted(FUSED))
def test_upstream_problems_are_read_fused(name):
    analysis = analyze(upstream(name))
    assert not analysis.unsupported and analysis.error is None, analysis
    assert chain_text(analysis.ops) == FUSED[name]


@needs_kernelbench
@pytest.mark.parametrize("name", ["2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide",
                                  "7_Conv3d_ReLU_LeakyReLU_GELU_Sigmoid_BiasAdd",
                                  "48_Conv3d_Scaling_Tanh_Multiply_Sigmoid",
                                  "68_Matmul_Min_Subtract",
                                  "20_ConvTranspose3d_Sum_ResidualAdd_Multiply_ResidualAdd",
                                  "22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish",
                                  "26_ConvTranspose3d_Add_HardSwish",
                                  "57_Conv2d_ReLU_HardSwish",
                                  "62_Matmul_GroupNorm_LeakyReLU_Sum",
                                  "88_Gemm_GroupNorm_Swish_Multiply_Swish",
                                  "79_Conv3d_Multiply_InstanceNorm_Clamp_Multiply_Max",
                                  "89_ConvTranspose3d_MaxPool_Softmax_Subtract_Swish_Max",
                                  "84_Gemm_BatchNorm_Scaling_Softmax",
                                  "85_Conv2d_GroupNorm_Scale_MaxPool_Clamp",
                                  "97_Matmul_BatchNorm_BiasAdd_Divide_Swish",
                                  "91_ConvTranspose2d_Softmax_BiasAdd_Scaling_Sigmoid",
                                  "49_ConvTranspose3d_Softmax_Sigmoid",
                                  "13_ConvTranspose3d_Mean_Add_Softmax_Tanh_Scaling",
                                  "24_Conv3d_Min_Softmax",
                                  "6_Conv3d_Softmax_MaxPool_MaxPool",
                                  "74_ConvTranspose3d_LeakyReLU_Multiply_LeakyReLU_Max"])
def test_fused_upstream_problems_match_at_small_sizes(name, tmp_path):
    check_first_answer(upstream(name), tmp_path)


@pytest.mark.parametrize("producer, init, shapes", [
    ("self.conv(x)", "self.conv = nn.Conv2d(3, 5, 3)", [(2, 3, 9, 8), (1, 3, 5, 7)]),
    ("torch.softmax(x, dim=1)", "", [(2, 5, 4, 3), (3, 5, 1, 2)]),
    ("x * 2.0", "", [(2, 5, 4, 3), (1, 5, 2, 2)])])
@pytest.mark.parametrize("view", [".view(1, -1, 1, 1)", ".reshape(5, 1, 1)", ".unsqueeze(-1).unsqueeze(-1)"])
def test_a_view_of_a_parameter_is_an_operand(tmp_path, producer, init, shapes, view):
    """x - self.b.view(1, -1, 1, 1) (KernelBench level 2's 89): the parameter read through the view forward wrote,
    in the epilogue of the op before it (a conv, a softmax) or as an elementwise operand."""
    init = "\n".join(filter(None, [init, "self.b = nn.Parameter(torch.randn(5))"]))
    ops, source = check_chain(tmp_path, f"return torch.sigmoid({producer} - self.b{view})", init,
                              [[shape] for shape in shapes], single=producer != "x * 2.0")  # an elementwise op is a chain
    assert f"self.b{view}" in source
    assert any(s[0] == "tsub" and s[1][:2] == ("attr", "b") for op in ops for s in op.detail.get("steps") or [])


def test_a_view_of_a_parameter_is_refused_where_it_would_be_read_as_a_weight(tmp_path):
    """Only an operand may be a view: a conv whose weight is a view of a parameter is not read."""
    problem = write(tmp_path, "return F.conv2d(x, self.w.view(5, 3, 3, 3))",
                    "self.w = nn.Parameter(torch.randn(135))", "[torch.randn(2, 3, 8, 8)]")
    analysis = analyze(problem)
    assert analysis.chain is None and analysis.single is None
