"""The conv3d family's shifted-rows move (conv/shifted.py over three axes): x and the weight copied once into padded
channels-last TF32 parts, each step's boxes loaded through TMA descriptors, where the conv has one group, stride 1 and
more than one tap (or strides that fold into the channels, conv/shifted.py), and more than 8 in-channels (folded), on
a Hopper GPU (here the candidate's kc_tma_gpu is patched to say so, and the TMA kernels run in Triton's interpreter
on the CPU); else the offsets K loop of the first move. Checked against torch on odd volumes: padding on some axes,
dilation, in-channels not a multiple of 4 and past 16, out-channels past 64, no bias, unbatched, folded strides, an
epilogue with a parameter operand, inf and NaN inputs; a spy says which kernel ran."""

import pytest
import torch

from kernelcraft.propose.builtin.families.conv3d import Conv3dTiles
from tests.propose.builtin.families.conv.test_shifted import on_hopper
from tests.propose.builtin.families.conv3d.test_conv3d import CONV, INIT, conv3d_op
from tests.propose.builtin.kernel_check import DEVICE, Keywords, Launches, check, load, moves, reference, render

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SHIFTED, OFFSETS = "kc_conv3d_shifted_kernel", "kc_conv3d_offsets_kernel"
RUNS = [((9, 5, 3), (2, 9, 5, 7, 6)),  # 9 in-channels (padded to 12), unpadded: the output shrinks
        ((10, 6, (3, 2, 1), 1, (1, 0, 0), (1, 2, 1), 1, False), (1, 10, 6, 7, 5)),  # padding on one axis, dilation
        ((20, 9, (2, 1, 3), 1, 1), (1, 20, 3, 4, 6)),  # 20 in-channels: 32-wide steps over a masked chunk
        ((9, 70, 3, 1, 1), (1, 9, 3, 4, 5)),  # 70 out-channels: the 128-wide tile
        ((9, 3, 2, 1, 1), (9, 4, 3, 5)),  # unbatched (C, D, H, W)
        ((3, 5, (3, 7, 7), (1, 2, 2), (1, 3, 3)), (1, 3, 4, 11, 10))]  # strides folded: 3 x 4 x 4 taps, 12 channels
FALLS_BACK = [((9, 5, 3, 2, 1), (1, 9, 7, 8, 9)),  # strided: 3 x 3 x 3 at stride 2 does not fold (2.4 times the taps)
              ((12, 4, 3, 1, 1, 1, 2), (1, 12, 3, 5, 4)),  # groups
              ((9, 4, 1), (2, 9, 3, 4, 5)),  # one tap
              ((8, 5, 3, 1, 1), (1, 8, 4, 5, 6))]  # 8 in-channels (shifted.PACK_C): the gathers won there


def shifted(op) -> Conv3dTiles:
    return next(m.params for m in moves(op) if m.params.k_order == "shifted")


def test_offered_once_at_3xtf32_with_the_first_moves_fallback():
    ms = [m.params for m in moves(conv3d_op())]
    p = shifted(conv3d_op())
    assert sum(m.k_order == "shifted" for m in ms) == 1 and p == ms[0].but(k_order="shifted")
    assert "shifted box" in p.idea() and "offsets K loop" in p.idea() and p.category() == "memory"


def test_the_shifted_rows_where_they_apply_and_offsets_elsewhere(tmp_path):
    spy = Launches(SHIFTED, OFFSETS)
    check(conv3d_op(), reference("self.conv(x)", INIT, CONV), shifted(conv3d_op()), RUNS + FALLS_BACK, tmp_path,
          patch=on_hopper(spy), rtol=1e-4, atol=1e-4)
    assert spy.seen == [SHIFTED] * len(RUNS) + [OFFSETS] * len(FALLS_BACK)


def test_an_epilogue_operand_and_infinities(tmp_path):
    op = conv3d_op([["relu"], ["mul", 0.5]])
    spy = Launches(SHIFTED, OFFSETS)
    check(op, reference("torch.relu(self.conv(x)) * 0.5", INIT, CONV), shifted(op), RUNS[:2], tmp_path,
          patch=on_hopper(spy), rtol=1e-4, atol=1e-4)
    assert spy.seen == [SHIFTED] * 2
    module = load(render(conv3d_op(), reference("self.conv(x)", INIT, CONV), shifted(conv3d_op())), tmp_path)
    spy = Launches(SHIFTED, OFFSETS)
    on_hopper(spy)(module)
    torch.manual_seed(0)
    model = module.Model(9, 4, 3, 1, 1).to(DEVICE).eval()
    new = module.ModelNew(9, 4, 3, 1, 1).to(DEVICE).eval()
    new.load_state_dict(model.state_dict())
    x = torch.randn(2, 9, 4, 5, 6, device=DEVICE)
    x[0, 1, 2, 3, 4] = float("inf")
    x[1, 0, 1, 1, 1] = float("nan")
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x), rtol=1e-4, atol=1e-4, equal_nan=True)
    assert spy.seen == [SHIFTED]


def test_compiled_sizes(tmp_path):
    params = shifted(conv3d_op()).but(compiled_sizes=True)
    spy = Keywords(SHIFTED, "DP")
    check(conv3d_op(), reference("self.conv(x)", INIT, CONV), params, RUNS[:2], tmp_path, patch=on_hopper(spy),
          rtol=1e-4, atol=1e-4)
    assert spy.seen == [5, 8]  # 5 + 0, 6 + 2 * 1
