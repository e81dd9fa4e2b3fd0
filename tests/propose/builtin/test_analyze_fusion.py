"""Fusion on upstream KernelBench level 2: the pointwise steps after a producer op (conv, transposed conv, linear,
norm) read as its epilogue, parameter operands included, and consecutive elementwise ops read as one, so fewer
full passes over big intermediates remain. Each problem's analysis as `kind[steps]` per op; a few of them end to end
through the built-in engineer's first answer, against the reference at their small (derived) sizes."""

import pytest
import torch

from kernelcraft.problems import Problem, load_problem
from kernelcraft.propose.base import Request
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.propose.parse import parse_kernel
from tests.helpers import KERNELBENCH
from tests.propose.builtin.kernel_check import DEVICE, assert_no_torch_compute

pytestmark = [pytest.mark.skipif(not KERNELBENCH.exists(), reason=f"no KernelBench copy at {KERNELBENCH}"),
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]

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
    "79_Conv3d_Multiply_InstanceNorm_Clamp_Multiply_Max":
        "conv3d[tmul] -> instancenorm[clamp] -> elementwise[tmul] -> reduce",
    "90_Conv3d_LeakyReLU_Sum_Clamp_GELU": "conv3d[leaky_relu,tadd,clamp,gelu]",
    # a linear's parameter operands of one value (a 0-dim nn.Parameter) or one per column
    "68_Matmul_Min_Subtract": "linear[tmin,tsub]",
}


def chain_text(ops) -> str:
    return " -> ".join(op.kind + (f"[{','.join(s[0] for s in op.detail['steps'])}]" if op.detail.get("steps")
                                  else "") for op in ops)


def upstream(name: str):
    return load_problem(LEVEL2 / f"{name}.py")


@pytest.mark.parametrize("name", sorted(FUSED))
def test_upstream_problems_are_read_fused(name):
    analysis = analyze(upstream(name))
    assert not analysis.unsupported and analysis.error is None, analysis
    assert chain_text(analysis.ops) == FUSED[name]


@pytest.mark.parametrize("name", ["2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide",
                                  "7_Conv3d_ReLU_LeakyReLU_GELU_Sigmoid_BiasAdd",
                                  "48_Conv3d_Scaling_Tanh_Multiply_Sigmoid",
                                  "68_Matmul_Min_Subtract",
                                  "74_ConvTranspose3d_LeakyReLU_Multiply_LeakyReLU_Max"])
def test_fused_upstream_problems_match_at_small_sizes(name, tmp_path):
    problem = upstream(name)
    answer = BuiltinProposer("cpu").ask(Request("implement", problem, "triton"))
    parsed = parse_kernel(answer.text)
    assert answer.error is None and parsed.error is None
    assert_no_torch_compute(parsed.source)
    path = tmp_path / "candidate.py"
    path.write_text(parsed.source)
    module = Problem(problem.name, path, parsed.source).load(small=True)  # the reference's derived sizes
    init = module.get_init_inputs()
    torch.manual_seed(0)
    ref = module.Model(*init).to(DEVICE).eval()
    torch.manual_seed(0)
    new = module.ModelNew(*init).to(DEVICE).eval()
    torch.manual_seed(1)
    inputs = [t.to(DEVICE) for t in module.get_inputs()]
    with torch.no_grad():
        want, got = ref(*inputs), new(*inputs)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
