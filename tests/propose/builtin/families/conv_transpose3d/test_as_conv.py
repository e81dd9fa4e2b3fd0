"""The transposed 3-D conv's as_conv move: where stride is 1, output padding 0, one group and padding at most dilation *
(k - 1), and more than 8 in-channels, the plain conv it equals by the shifted-rows GEMM (conv/shifted.py) as on a Hopper
GPU (the candidate's kc_tma_gpu patched to say so; the TMA kernels run in Triton's interpreter on the CPU); elsewhere
the per-phase GEMMs. First where the op has stride 1 and no output padding; checked against torch on odd volumes on both
sides of the run-time choice (a spy says which kernel ran), with padding, dilation, no bias, unbatched input and an
epilogue step."""

import pytest

from kernelcraft.propose.builtin.families.conv_transpose3d import Tiles
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.families.conv.test_shifted import on_hopper
from tests.propose.builtin.families.conv_transpose3d.test_kernels import CONV, INIT, convt_op
from tests.propose.builtin.kernel_check import Launches, check, moves, reference

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SHIFTED, PHASE = "kc_conv3d_shifted_kernel", "kc_conv_transpose3d_kernel"
ROUTED = [((9, 4, 3), (2, 9, 3, 4, 5)),  # no padding: the output grows by k - 1
          ((10, 3, (3, 2, 2), 1, (1, 0, 1), 0, 1, False, (1, 2, 1)), (1, 10, 4, 3, 5)),  # padding, dilation, no bias
          ((9, 5, (1, 2, 3), 1, (0, 1, 2)), (9, 2, 3, 4))]  # unbatched; padding as large as dilation * (k - 1)
PHASES = [((3, 4, 3, 2, 1, 1), (1, 3, 3, 4, 5)),  # a stride and output padding
          ((4, 6, 3, 1, 1, 0, 2), (1, 4, 3, 4, 3)),  # groups
          ((2, 3, 3, 1, 3), (1, 2, 6, 7, 8)),  # padding past dilation * (k - 1)
          ((2, 3, 1), (1, 2, 3, 4, 5)),  # one tap
          ((8, 3, 3), (1, 8, 3, 4, 5))]  # 8 in-channels (shifted.PACK_C): 3-D shifted rows take more


def test_first_where_the_stride_is_one_and_there_is_no_output_padding():
    ms = [m.params for m in moves(convt_op())]
    assert ms[0].as_conv and ms[0] == ms[1].but(as_conv=True) and sum(p.as_conv for p in ms) == 1
    assert "plain conv it equals" in ms[0].idea() and ms[0].category() == "memory" and not ms[0].relaxed
    strided = Op("conv_transpose3d", {**convt_op().detail, "stride": [1, 2, 1]})
    padded = Op("conv_transpose3d", {**convt_op().detail, "output_padding": [0, 0, 1]})
    assert not any(m.params.as_conv for m in moves(strided) + moves(padded))
    with pytest.raises(ValueError, match="tf32x3"):
        Tiles(as_conv=True)


def test_the_shifted_rows_where_they_apply_and_the_phases_elsewhere(tmp_path):
    spy = Launches(SHIFTED, PHASE)
    check(convt_op(), reference("self.conv(x)", INIT, CONV), moves(convt_op())[0].params, ROUTED + PHASES, tmp_path,
          patch=on_hopper(spy), rtol=1e-4, atol=1e-4)
    assert spy.seen[:len(ROUTED)] == [SHIFTED] * len(ROUTED) and SHIFTED not in spy.seen[len(ROUTED):]


def test_an_epilogue_step(tmp_path):
    op = convt_op([["relu"], ["mul", 0.5]])
    spy = Launches(SHIFTED, PHASE)
    check(op, reference("torch.relu(self.conv(x)) * 0.5", INIT, CONV), moves(op)[0].params, ROUTED[:2], tmp_path,
          patch=on_hopper(spy), rtol=1e-4, atol=1e-4)
    assert spy.seen == [SHIFTED] * 2


def test_compiled_sizes(tmp_path):
    params = moves(convt_op())[0].params.but(compiled_sizes=True)
    assert "sizes compiled in" in params.idea()
    spy = Launches(SHIFTED, PHASE)
    check(convt_op(), reference("self.conv(x)", INIT, CONV), params, ROUTED[:2], tmp_path, patch=on_hopper(spy),
          rtol=1e-4, atol=1e-4)
    assert spy.seen == [SHIFTED] * 2
    with pytest.raises(ValueError, match="compiled_sizes"):
        Tiles(precision="tf32x3", compiled_sizes=True)
