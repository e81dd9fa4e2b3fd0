"""The direct loop (conv/direct.py), the first move's kernel for convolutions of few in-channels where the shifted
rows do not apply: outer products in fp32 FMAs over each in-channel's taps, in the conv and conv3d families' kernels.
Checked against torch on odd shapes: strides, padding, dilation, groups of few channels, no bias, unbatched and 1-D
inputs, out-channels past one channel tile, a fused epilogue; where it stands aside (more in-channels a group, a 3-D
K past 81, 16-bit inputs, and where the shifted rows apply on a Hopper GPU: stride 1, or strides that fold into the
channels); a spy says which kernel ran. And each build it launches at KernelBench's sizes, compiled for sm_90a
with no GPU, keeps its registers."""

import pytest
import torch

from kernelcraft.propose.builtin.families.conv import direct
from tests.propose.builtin.families.conv.test_conv import CONV, CONV1, INIT, conv1d_op, conv_op
from tests.propose.builtin.families.conv.test_shifted import SHIFTED, on_hopper
from tests.propose.builtin.families.conv3d.test_conv3d import CONV as CONV3D, conv3d_op
from tests.propose.builtin.kernel_check import DEVICE, Launches, check, moves, reference, render

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# on a Hopper GPU the shifted rows take a conv2d of fp32 at stride 1 or strides that fold (TMA); elsewhere the direct
# kernel does
TMA = DEVICE == "cuda" and torch.cuda.get_device_capability()[0] >= 9

DIRECT, PACKED = "kc_conv2d_direct_kernel", "kc_conv2d_kernel"
DIRECT3, OFFSETS3, SHIFTED3 = "kc_conv3d_direct_kernel", "kc_conv3d_offsets_kernel", "kc_conv3d_shifted_kernel"
# (init args (cin, cout, k, s, p, d, g, bias), input shape): the direct loop runs
RUNS = [((3, 5, 11, 4, 2), (2, 3, 37, 41)),  # AlexNet's first conv in small: 11 x 11 taps at stride 4, padded
        ((8, 6, 3, (2, 1), (0, 1), (1, 2), 2, False), (1, 8, 11, 10)),  # 4 in-channels a group, dilated, no bias
        ((3, 130, 3, 2, 1), (1, 3, 7, 6)),  # 130 out-channels: two 128-wide channel tiles
        ((2, 3, 5, 3), (2, 9, 10)),  # unbatched, stride 3
        ((3, 5, 3, 1, 1), (2, 3, 9, 7)),  # stride 1
        ((3, 5, 11, 4, 2, 2), (1, 3, 37, 41))]  # dilated at stride 4
# the kernel each case of RUNS takes: on a Hopper GPU 0 and 3 (strides that fold) and 4 (stride 1) the shifted rows'
RAN = [SHIFTED if TMA else DIRECT, DIRECT, DIRECT, SHIFTED if TMA else DIRECT, SHIFTED if TMA else DIRECT, DIRECT]
RUNS3 = [((3, 5, 3), (2, 3, 5, 7, 6)),  # 3 in-channels, 27 taps, no padding
         ((4, 20, (3, 2, 1), (2, 1, 2), (1, 0, 1), (1, 2, 1), 2, False), (1, 4, 6, 7, 5)),  # groups, dilated; 20
         ((3, 4, 3, 2, 1), (3, 5, 6, 7))]                         # out-channels: two 16-wide tiles; unbatched


def first(op):
    return moves(op)[0].params


def test_the_first_moves_take_it_for_few_channels_where_their_epilogue_fits():
    assert first(conv_op()).k_order == first(conv3d_op()).k_order == "shifted"
    assert "x.dtype == torch.float32 and CPG <= 4" in direct.TILES_2D.applies()
    assert "K >= 17" in direct.TILES_2D.applies() and "K >=" not in direct.TILES_3D.applies()
    assert direct.TILES_3D.max_k == 81 and direct.TILES_3D.BLOCK_N == 16 and not direct.TILES_3D.unroll
    assert direct.fits(conv_op([["relu"], ["mul", 0.5]]))
    assert not direct.fits(conv3d_op([["tadd", ("attr", "a")]]))  # a tensor read at the output's coordinates


def test_conv2d_direct_loop(tmp_path):
    spy = Launches(SHIFTED, PACKED, DIRECT)
    check(conv_op(), reference("self.conv(x)", INIT, CONV), first(conv_op()), RUNS, tmp_path, patch=spy,
          rtol=1e-4, atol=1e-4)
    assert spy.seen == RAN


def test_conv2d_stands_aside_for_the_shifted_rows_more_channels_and_half_inputs(tmp_path):
    spy = Launches(SHIFTED, PACKED, DIRECT)
    aside = [RUNS[4], ((5, 4, 3, 2), (1, 5, 9, 8)), ((2, 3, 2, 3), (2, 2, 9, 10))]
    check(conv_op(), reference("self.conv(x)", INIT, CONV), first(conv_op()), aside, tmp_path, patch=on_hopper(spy),
          rtol=1e-4, atol=1e-4)
    # stride 1 on Hopper: the shifted rows; 5 in-channels, or K = 8 (direct.TILES_2D.min_k): the packed GEMM
    assert spy.seen == [SHIFTED, PACKED, PACKED]
    if DEVICE == "cuda":  # 16-bit inputs keep the tensor cores
        spy = Launches(SHIFTED, PACKED, DIRECT)
        check(conv_op(), reference("self.conv(x)", INIT, CONV), first(conv_op()), RUNS[:1], tmp_path, patch=spy,
              rtol=1e-2, atol=1e-2, dtype=torch.float16)
        assert spy.seen == [PACKED]


def test_conv2d_epilogue_and_conv1d(tmp_path):
    op = conv_op([["relu"], ["mul", 0.5]])
    spy = Launches(DIRECT, SHIFTED)
    check(op, reference("torch.relu(self.conv(x)) * 0.5", INIT, CONV), first(op), RUNS[:3], tmp_path, patch=spy,
          rtol=1e-4, atol=1e-4)
    spy1 = Launches(DIRECT, "kc_conv2d_shifted_kernel")
    check(conv1d_op(), reference("self.conv(x)", INIT, CONV1), first(conv1d_op()),
          [((4, 7, 5, 2, 2, 3), (2, 4, 77)), ((3, 4, 7, 2), (3, 19))], tmp_path, patch=spy1, rtol=1e-4, atol=1e-4)
    # the 1-D conv of 7 taps at stride 2 folds on a Hopper GPU (4 taps over 6 channels)
    assert spy.seen == RAN[:3] and spy1.seen == [DIRECT, SHIFTED if TMA else DIRECT]


def test_conv3d_direct_loop_and_where_it_stands_aside(tmp_path):
    spy = Launches(SHIFTED3, OFFSETS3, DIRECT3)
    aside = [((3, 5, (3, 5, 7)), (1, 3, 4, 6, 8)),  # K = 315: the offsets loop won at 105 taps
             ((5, 4, 3), (1, 5, 4, 5, 6))]  # 5 in-channels
    check(conv3d_op(), reference("self.conv(x)", INIT, CONV3D), first(conv3d_op()), RUNS3 + aside, tmp_path,
          patch=on_hopper(spy), rtol=1e-4, atol=1e-4)
    assert spy.seen == [DIRECT3] * len(RUNS3) + [OFFSETS3] * len(aside)
    op = conv3d_op([["relu"], ["add", 1.0]])
    spy = Launches(DIRECT3)
    check(op, reference("torch.relu(self.conv(x)) + 1.0", INIT, CONV3D), first(op), RUNS3[:2], tmp_path, patch=spy,
          rtol=1e-4, atol=1e-4)
    assert spy.seen == [DIRECT3] * 2


# convs the direct kernel takes on a Hopper GPU, at sizes where its builds are specialized as at KernelBench's
# (init args, input shape): level 1's 54 and 59, level 2's Conv3d chains (16 and 24 out-channels), 1 and 4
# in-channels, a stride; MobileNet's and ShuffleNet's first conv (3 x 3 at stride 2), a dilated 11 x 11 at stride 4,
# 4 in-channels a group, 130 out-channels
BUILDS3 = [((3, 64, 3), (16, 3, 64, 64, 64)), ((3, 64, (3, 3, 1)), (16, 3, 64, 64, 10)),
           ((3, 16, 3), (128, 3, 16, 32, 32)), ((3, 24, 3), (128, 3, 16, 32, 32)), ((1, 128, 3, 1, 1), (2, 1, 9, 9, 9)),
           ((4, 32, (2, 3, 3), 2), (2, 4, 9, 17, 17))]
BUILDS2 = [((3, 32, 3, 2, 1), (10, 3, 224, 224)), ((3, 24, 3, 2, 1), (10, 3, 224, 224)),
           ((3, 96, 11, 4, 2, 2), (8, 3, 224, 224)), ((8, 64, 3, 2, 1, 1, 2), (2, 8, 56, 56)),
           ((3, 130, 5, 2, 2), (2, 3, 64, 64))]


@pytest.mark.parametrize("op, conv, cases, name", [(conv3d_op(), CONV3D, BUILDS3, DIRECT3),
                                                    (conv_op(), CONV, BUILDS2, DIRECT)], ids=["3d", "2d"])
def test_its_builds_keep_their_registers(op, conv, cases, name, tmp_path):
    """Each build of the direct kernel the first move launches, compiled for sm_90a as the launch specializes it
    (Triton's own compiler and ptxas, no GPU: backends/triton_static.py), keeps its registers: no spills. Builds
    that lost them (ptxas's 32-register floor and kilobytes of local memory) ran 40x slower on an H100."""
    from kernelcraft.backends import triton_static

    if not (triton_static.tools() / "cuobjdump").exists():
        pytest.skip("this Triton has no bundled cuobjdump")
    path = tmp_path / "kc_direct_builds.py"
    path.write_text(render(op, reference("self.conv(x)", INIT, conv), first(op)))
    rows = [r for r in triton_static.candidate_builds(path, [[list(init), [list(shape)]] for init, shape in cases])
            if r["kernel"] == name]
    assert [r["case"] for r in rows] == list(range(len(cases)))
    for r in rows:
        assert r["local"] == 0 and r["registers"] > 32, (cases[r["case"]], r)
