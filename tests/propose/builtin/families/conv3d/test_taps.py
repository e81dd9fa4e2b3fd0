"""The conv3d family's taps K loop (k_order "taps": the taps (kd, kh, kw) outer, each tap's in-channels in BLOCK_K
chunks inner, over a weight permuted to (CO, KD, KH, KW, CPG)) against nn.Conv3d / F.conv3d on odd volumes:
channel counts that are not a multiple of the chunk, stride, padding, dilation, groups, no bias, unbatched, fp16,
an epilogue; and the fallback to the packed K loop where a group has fewer in-channels than a chunk (depthwise
included). A spy on the candidate's kernels checks which K loop ran; the chunks are narrowed (BLOCK_K 4, on a GPU 16
with 4x the channels: kernel_check.CHANNELS) so a few channels fill several of them."""

import pytest
import torch

from kernelcraft.propose.builtin.families.conv3d import Conv3dTiles
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.families.conv3d.test_conv3d import CONV, INIT, conv3d_op
from tests.propose.builtin.kernel_check import CHANNELS as S, Launches, check, more_channels, moves, reference
from tests.propose.builtin.kernel_check import move_tolerance as tolerance

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

PACKED, TAPS = "kc_conv3d_kernel", "kc_conv3d_taps_kernel"


def taps_moves(op: Op) -> list:
    return [m.params for m in moves(op) if m.params.k_order == "taps"]


def narrow(op: Op, precision: str = "tf32x3") -> Conv3dTiles:
    """The taps move of `precision` with 4-wide channel chunks (16 on a GPU)."""
    return next(p for p in taps_moves(op) if p.precision == precision).but(BLOCK_K=4 * S)


# (init args, input shape), every group with at least 4 in-channels: the taps kernel runs
TAPS_CASES = more_channels([((5, 6, 3, 1, 1), (2, 5, 3, 5, 7)),  # 5 channels: a full chunk and a masked one; padding
              ((8, 6, (3, 2, 1), (2, 1, 2), (1, 0, 1), (1, 2, 1), 2, False), (1, 8, 6, 7, 5)),  # groups, dilation
              ((4, 3, 2, 2, 1), (4, 4, 5, 3)),  # unbatched, even kernel, strided, padded
              ((6, 4, 3, 1, "same", 2), (1, 6, 5, 6, 7)),  # "same" padding, dilation 2
              ((4, 3, 1), (1, 4, 2, 5, 7))], 3)  # 1x1x1 kernel
PACKED_CASES = more_channels([((3, 5, 3), (2, 3, 5, 7, 6)),  # 3 channels
                              ((4, 4, 3, 1, 1, 1, 4), (1, 4, 3, 5, 4))], 3)  # depthwise: one channel per group


def test_taps_moves_follow_the_first_and_the_relaxed_one_follows_the_first_relaxed_packed():
    ms = [m.params for m in moves(conv3d_op())]
    assert [p.k_order for p in ms[:2]] == ["shifted", "offsets"]  # the shifted rows, falling back to the offsets
    assert [(p.precision, p.k_order, p.BLOCK_K) for p in ms[2:4]] == [("tf32x3", "taps", 32), ("ieee", "taps", 32)]
    assert [p.k_order for p in ms if p.precision == "tf32"][:3] == ["offsets", "packed", "taps"]
    assert "K loop over the kernel taps" in ms[2].idea() and ms[2].idea() != ms[2].but(k_order="packed").idea()


@pytest.mark.parametrize("params", taps_moves(conv3d_op()), ids=lambda p: p.precision)
def test_taps_moves_as_offered(params, tmp_path):
    """The moves' own 32-wide chunks: 33 channels fill one and a 1-channel masked one; 3 fall back."""
    spy = Launches(PACKED, TAPS)
    check(conv3d_op(), reference("self.conv(x)", INIT, CONV), params,
          [((33, 5, 3, 1, 1), (1, 33, 3, 5, 7)), *PACKED_CASES[:1]], tmp_path, patch=spy, **tolerance(params))
    assert spy.seen == [TAPS, PACKED]


@pytest.mark.parametrize("precision", ["tf32x3", "ieee"])
def test_taps_on_odd_volumes(precision, tmp_path):
    params = narrow(conv3d_op(), precision)
    spy = Launches(PACKED, TAPS)
    check(conv3d_op(), reference("self.conv(x)", INIT, CONV), params, TAPS_CASES, tmp_path, patch=spy,
          **tolerance(params))
    assert spy.seen == [TAPS] * len(TAPS_CASES)


def test_fewer_channels_than_a_chunk_fall_back_to_the_packed_loop(tmp_path):
    spy = Launches(PACKED, TAPS)
    check(conv3d_op(), reference("self.conv(x)", INIT, CONV), narrow(conv3d_op()), PACKED_CASES, tmp_path,
          patch=spy, rtol=1e-4, atol=1e-4)
    assert spy.seen == [PACKED, PACKED]


def test_taps_epilogue_functional_values_and_half_inputs(tmp_path):
    op = conv3d_op([["relu"], ["mul", 0.5]])
    spy = Launches(PACKED, TAPS)
    check(op, reference("torch.relu(self.conv(x)) * 0.5", INIT, CONV), narrow(op), TAPS_CASES[:3], tmp_path,
          patch=spy, rtol=1e-4, atol=1e-4)
    op = Op("conv3d", {"stride": [2, 1, 1], "padding": [1, 0, 2], "dilation": [1, 2, 1], "groups": 2, "module": None,
                       "groups_attr": "g", "weight": "w", "bias": None, "steps": [], "pool": None})
    ref = reference("F.conv3d(x, self.w, None, (2, 1, 1), (1, 0, 2), (1, 2, 1), self.g)", "self",
                    f"self.g = 2\nself.w = nn.Parameter(torch.randn({6 * S}, {5 * S}, 3, 2, 3))")
    check(op, ref, narrow(op), [((), (2, 10 * S, 5, 6, 5)), ((), (1, 10 * S, 3, 3, 1))], tmp_path, patch=spy,
          rtol=1e-4, atol=1e-4)
    check(conv3d_op(), reference("self.conv(x)", INIT, CONV), narrow(conv3d_op()), TAPS_CASES[:2], tmp_path,
          patch=spy, rtol=1e-2, atol=1e-2, dtype=torch.float16)
    assert spy.seen == [TAPS] * 7
