"""Problems end to end through the built-in engineer: the suite's transposed 3-D conv on its first moves, and
upstream KernelBench problems it newly covers (a single op with its hyper-parameters from the module, one with an
epilogue reading numbers from the module, a chain into a groupnorm): the engineer's first answer, parsed as any
answer is, against the reference at the problem's small (derived) sizes."""

import pytest

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from tests.helpers import KERNELBENCH
from tests.propose.builtin.kernel_check import check_first_answer, check_small_problem

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def test_the_suite_problem_is_covered_and_matches_on_its_small_sizes(tmp_path):
    problem = load_problem("level1/conv_transpose3d")
    engineer = BuiltinProposer("cuda")  # a GPU's moves (a CPU is offered none that only a GPU tells apart)
    op = engineer.coverage(problem, "triton").single
    assert op.kind == "conv_transpose3d"
    offered = engineer.moves(op, "triton")
    assert offered[0].params.precision == "tf32x3" and not any(m.relaxed for m in offered)
    for move in offered[:3]:  # 3xTF32 on two tilings, exact fp32
        check_small_problem(op, problem, move.params, tmp_path)


UPSTREAM = {  # problem -> the kinds the engineer reads from it
    "level1/72_conv_transposed_3D_asymmetric_input_asymmetric_kernel___strided_padded_grouped_":
        ["conv_transpose3d"],
    "level2/100_ConvTranspose3d_Clamp_Min_Divide": ["conv_transpose3d"],
    "level2/60_ConvTranspose3d_Swish_GroupNorm_HardSwish": ["conv_transpose3d", "groupnorm"],
}


@pytest.mark.skipif(not KERNELBENCH.exists(), reason=f"no KernelBench copy at {KERNELBENCH}")
@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_newly_covered_upstream_problems_match_at_small_sizes(name, tmp_path):
    problem = load_problem(KERNELBENCH / f"{name}.py")
    engineer = BuiltinProposer("cpu")
    analysis = engineer.coverage(problem, "triton")
    assert [op.kind for op in analysis.ops] == UPSTREAM[name]
    check_first_answer(problem, tmp_path)
