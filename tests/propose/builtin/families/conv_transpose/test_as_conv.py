"""The transposed conv's as_conv move: where stride is 1, output padding 0 and padding at most dilation * (k - 1), the
plain conv it equals (the weight's in- and out-channels swapped, its taps flipped) on the conv family's packed
implicit GEMM; elsewhere the per-phase GEMMs. Offered, second, only where the op's stride is 1 and it has no output
padding; checked against torch at odd sizes on both sides of the run-time choice (a spy on the conv kernel says which
side ran), with groups, dilation, padding, no bias, unbatched and fp16 inputs, 1-D, and an epilogue with parameter
operands."""

import pytest
import torch

from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.families.conv_transpose import ConvTransposeTiles
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.families.conv_transpose.test_conv_transpose2d import CONV, INIT, convt_op
from tests.propose.builtin.kernel_check import Keywords, check, moves, reference
from tests.propose.builtin.kernel_check import move_tolerance as tolerance
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

CONV_KERNEL = "kc_conv2d_kernel"
# (init args, input shape): the conv it equals
ROUTED = [((3, 4, 3), (2, 3, 5, 6)),  # stride 1, no padding: the output grows by k - 1
          ((4, 6, (3, 2), 1, (1, 0), 0, 2, False, (2, 1)), (1, 4, 5, 4)),  # groups, dilation, padding, no bias
          ((3, 5, (2, 3), 1, (1, 2)), (3, 4, 5)),  # unbatched; padding as large as dilation * (k - 1)
          ((2, 3, 1), (1, 2, 1, 1))]  # a 1x1 kernel on one pixel
# the per-phase GEMMs: a stride, output padding, padding past dilation * (k - 1)
PHASES = [((3, 4, 3, 2, 1, 1), (1, 3, 4, 5)), ((3, 4, 3, 1, 3), (1, 3, 7, 8))]


def _as_conv(op: Op):
    return [m.params for m in moves(op) if m.params.as_conv]


def test_first_where_the_stride_is_one_and_there_is_no_output_padding():
    ms = [m.params for m in moves(convt_op())]
    assert ms[0].as_conv and not ms[1].as_conv and sum(p.as_conv for p in ms) == 1
    assert (ms[1].precision, ms[1].k_order) == ("tf32x3", "taps")  # the taps move second
    assert (ms[0].precision, ms[0].k_order, ms[0].BLOCK_M, ms[0].BLOCK_N, ms[0].BLOCK_K) == (
        "tf32x3", "packed", 128, 128, 16)
    assert "plain conv it equals" in ms[0].idea() and ms[0].category() == "memory" and not ms[0].relaxed
    strided = Op("conv_transpose2d", {**convt_op().detail, "stride": [2, 1]})
    padded = Op("conv_transpose2d", {**convt_op().detail, "output_padding": [0, 1]})
    assert _as_conv(strided) == [] and _as_conv(padded) == []
    with pytest.raises(ValueError):
        ConvTransposeTiles(as_conv=True, k_order="taps")


def test_the_conv_it_equals_where_it_applies_and_the_phases_elsewhere(tmp_path):
    params = _as_conv(convt_op())[0]
    ref = reference("self.conv(x)", INIT, CONV)
    spy = Keywords(CONV_KERNEL, "BLOCK_K")
    check(convt_op(), ref, params, ROUTED, tmp_path, patch=spy, **tolerance(params))
    assert spy.seen == [16] * len(ROUTED)
    spy = Keywords(CONV_KERNEL, "BLOCK_K")
    check(convt_op(), ref, params, PHASES, tmp_path, patch=spy, **tolerance(params))
    assert spy.seen == []
    check(convt_op(), ref, params, ROUTED[:2], tmp_path, rtol=1e-2, atol=1e-2, dtype=torch.float16)


def test_an_epilogue_with_parameter_operands_and_a_1d_conv(tmp_path):
    init = ("self.conv = nn.ConvTranspose2d(3, 4, (3, 2), padding=(1, 0))\n"
            "self.a = nn.Parameter(torch.randn(4, 1, 1))\nself.b = nn.Parameter(torch.randn(6))")
    forward = "return torch.tanh(self.conv(x) - self.a) * self.b"
    move = _index(tmp_path, forward, init, "[torch.randn(2, 3, 5, 5)]")
    ops, source = check_chain(tmp_path, forward, init, [[(2, 3, 5, 5)], [(3, 4, 5)]], move=move, single=True)
    assert ops[0].detail["steps"] == [["tsub", ("attr", "a")], ["tanh"], ["tmul", ("attr", "b")]]
    assert f"{CONV_KERNEL}[grid](" in source
    init = "self.conv = nn.ConvTranspose1d(4, 6, 3, dilation=2, bias=False)"
    move = _index(tmp_path, "return torch.relu(self.conv(x))", init, "[torch.randn(2, 4, 9)]")
    ops, _ = check_chain(tmp_path, "return torch.relu(self.conv(x))", init, [[(2, 4, 9)], [(4, 5)]], move=move,
                         single=True)
    assert ops[0].kind == "conv_transpose1d"


def _index(tmp_path, forward: str, init: str, inputs: str) -> int:
    """The as_conv move's place among the moves of the problem written from `forward`, `init` and `inputs`."""
    problem = write(tmp_path, forward, init, inputs=inputs)
    return next(i for i, m in enumerate(moves(analyze(problem).single)) if m.params.as_conv)
