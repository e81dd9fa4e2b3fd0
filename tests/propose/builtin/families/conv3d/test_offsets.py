"""The conv3d family's offsets K loop (k_order "offsets": the packed (channel, kd, kh, kw) K, each patch element's
input offset its row's window origin plus its K index's offset; bounds masks only where the conv pads) against
nn.Conv3d / F.conv3d on odd volumes: K not a multiple of the step and smaller than one, tiles across batch
boundaries, stride, dilation, padding on every axis, on one axis, "same" and none, groups, depthwise, no bias,
unbatched, fp16, an epilogue with a parameter operand. A spy on the candidate's kernels checks that the offsets
kernel ran and whether it was built with bounds masks (BOUNDS: any padding)."""

import pytest
import torch

from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.families.conv3d.test_conv3d import CONV, INIT, conv3d_op
from tests.propose.builtin.kernel_check import Keywords, check, moves, reference
from tests.propose.builtin.kernel_check import move_tolerance as tolerance

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

OFFSETS = "kc_conv3d_offsets_kernel"

# (init args, input shape, the BOUNDS the forward should pass)
CASES = [((3, 5, 3), (2, 3, 5, 7, 6), False),  # 3 channels: K 81, six 16-wide steps, the last masked
         ((3, 7, 3), (2, 3, 9, 10, 11), False),  # 1008 outputs: eight row tiles, one across the batch boundary
         ((4, 6, 3, 1, 1), (1, 4, 5, 6, 7), True),  # padded on every axis
         ((3, 4, (1, 3, 3), 1, (0, 0, 2)), (2, 3, 3, 5, 4), True),  # padded along the width only
         ((4, 6, (3, 2, 1), (2, 1, 2), (1, 0, 1), (1, 2, 1), 2, False), (1, 4, 6, 7, 5), True),  # groups, no bias
         ((3, 5, 3, 2, 0, 1), (1, 3, 7, 8, 9), False),  # strided, unpadded
         ((2, 3, 2, 1, 0, 2), (1, 2, 5, 6, 5), False),  # dilated, unpadded
         ((3, 4, (3, 3, 1)), (2, 3, 6, 7, 3), False),  # level1/59's kernel: K 27
         ((2, 3, 2, 2, 1), (2, 5, 4, 3), True),  # unbatched (C, D, H, W), even kernel, strided, padded
         ((4, 4, 3, 1, 1, 1, 4), (1, 4, 3, 5, 4), True),  # depthwise: one in-channel per group, K 27
         ((3, 7, 3, 1, "same", 2), (1, 3, 5, 6, 7), True),  # "same" padding, dilated
         ((2, 3, 1, 1, "valid"), (1, 2, 1, 1, 1), False),  # 1x1x1 kernel on one voxel: K 2, one masked step
         ((8, 5, 3), (1, 8, 4, 5, 6), False)]  # 8 channels: K 216


def offsets_moves(op: Op) -> list:
    return [m.params for m in moves(op) if m.params.k_order == "offsets"]


def test_offsets_moves_lead_and_say_what_their_loop_does():
    ms = [m.params for m in moves(conv3d_op())][1:]  # after the shifted rows, which fall back to the first of them
    assert (ms[0].k_order, ms[0].precision, ms[0].BLOCK_K) == ("offsets", "tf32x3", 16)
    assert [(p.precision, p.BLOCK_K) for p in offsets_moves(conv3d_op())] == [
        ("tf32x3", 16), ("tf32x3", 32), ("ieee", 16), ("tf32", 16)]
    assert "K loop as offsets" in ms[0].idea() and ms[0].idea() != ms[0].but(k_order="packed").idea()
    assert ms[0].category() == "memory" and not ms[0].relaxed


@pytest.mark.parametrize("params", offsets_moves(conv3d_op()), ids=lambda p: f"{p.precision}-{p.BLOCK_K}")
def test_offsets_moves_on_odd_volumes(params, tmp_path):
    spy = Keywords(OFFSETS, "BOUNDS")
    check(conv3d_op(), reference("self.conv(x)", INIT, CONV), params, [c[:2] for c in CASES], tmp_path, patch=spy,
          **tolerance(params))
    assert spy.seen == [bounds for *_, bounds in CASES]


def test_offsets_epilogue_operand_functional_values_and_half_inputs(tmp_path):
    params = offsets_moves(conv3d_op())[0]
    op = conv3d_op([["relu"], ["mul", 0.5]])
    spy = Keywords(OFFSETS, "BOUNDS")
    check(op, reference("torch.relu(self.conv(x)) * 0.5", INIT, CONV), params, [c[:2] for c in CASES[:5]], tmp_path,
          patch=spy, rtol=1e-4, atol=1e-4)
    op = Op("conv3d", {"stride": [2, 1, 1], "padding": [1, 0, 2], "dilation": [1, 2, 1], "groups": 2, "module": None,
                       "groups_attr": "g", "weight": "w", "bias": None, "steps": [["tadd", ("attr", "a")]],
                       "pool": None})
    ref = reference("F.conv3d(x, self.w, None, (2, 1, 1), (1, 0, 2), (1, 2, 1), self.g) + self.a", "self",
                    "self.g = 2\nself.w = nn.Parameter(torch.randn(6, 2, 3, 2, 3))\n"
                    "self.a = nn.Parameter(torch.randn(6, 1, 1, 1))")
    check(op, ref, params, [((), (2, 4, 7, 6, 5)), ((), (1, 4, 3, 3, 1))], tmp_path, patch=spy, rtol=1e-4, atol=1e-4)
    check(conv3d_op(), reference("self.conv(x)", INIT, CONV), params, [c[:2] for c in CASES[:3]], tmp_path,
          patch=spy, rtol=1e-2, atol=1e-2, dtype=torch.float16)
    assert spy.seen == [False, False, True, True, True] + [True, True] + [False, False, True]


def test_the_first_move_doubles_the_voxel_tile_where_the_channel_tile_is_half_wide(tmp_path):
    """wide_m: a group of 33 to 64 out-channels (a 64-wide channel tile) takes 256-voxel tiles; 32 or fewer (a
    narrower channel tile), or more than 64 (the whole 128), keep 128."""
    ms = [m.params for m in moves(conv3d_op())]
    params = ms[1]  # the first offsets move, the shifted first move's fallback
    assert ms[0] == params.but(k_order="shifted", compiled_sizes=True)  # the first builds per shape
    assert params.wide_m and params.k_order == "offsets" and "64, 256-voxel tiles (the same area)" in params.idea()
    assert not any(p.wide_m for p in ms[2:])
    spy = Keywords(OFFSETS, "BLOCK_M", "BLOCK_N")
    cases = [((3, 64, 3), (1, 3, 5, 6, 7)), ((3, 33, 2), (2, 3, 4, 5, 6)), ((3, 32, 3), (1, 3, 4, 5, 6)),
             ((3, 65, 2), (1, 3, 3, 4, 5)), ((4, 96, 2, 1, 0, 1, 2), (1, 4, 3, 4, 5))]  # the last: 48 a group
    check(conv3d_op(), reference("self.conv(x)", INIT, CONV), params, cases, tmp_path, patch=spy,
          **tolerance(params))
    assert [(s["BLOCK_M"], s["BLOCK_N"]) for s in spy.seen] == [(256, 64), (256, 64), (128, 32), (128, 128),
                                                                   (256, 64)]


# the conv3d kernels an offsets move may launch
LAUNCHED = (OFFSETS, "kc_conv3d_taps_kernel", "kc_conv3d_kernel")


@pytest.mark.parametrize("params", offsets_moves(conv3d_op()), ids=lambda p: f"{p.precision}-{p.BLOCK_K}")
def test_offsets_moves_take_the_taps_loop_from_32_channels_a_group(params, tmp_path):
    """In a padded conv with TAPS_FIRST in-channels per group or more an offsets move runs the taps loop in chunks of
    that many (a chunk and a masked part at 33; two groups of 32 at 64); at 31, or unpadded, the offsets loop."""
    from kernelcraft.propose.builtin.families.conv3d.kernels import TAPS_FIRST

    spy = Keywords(LAUNCHED, "BLOCK_K")
    cases = [((33, 4, 3, 1, 1), (1, 33, 4, 3, 5)), ((64, 6, (1, 3, 2), 1, (0, 1, 0), 1, 2), (2, 64, 3, 4, 3)),
             ((31, 4, 2, 1, 1), (1, 31, 3, 4, 3)), ((33, 4, 2), (1, 33, 3, 4, 3))]
    check(conv3d_op(), reference("self.conv(x)", INIT, CONV), params, cases, tmp_path, patch=spy,
          **tolerance(params))
    assert spy.seen == [("kc_conv3d_taps_kernel", TAPS_FIRST)] * 2 + [(OFFSETS, params.BLOCK_K)] * 2
    assert f"a group has {TAPS_FIRST}+ in-channels, the taps K loop" in params.idea()


@pytest.mark.parametrize("params", [offsets_moves(conv3d_op())[0].but(compiled_sizes=True),
                                    offsets_moves(conv3d_op())[0].but(compiled_sizes=True, k_order="taps")],
                         ids=lambda p: p.k_order)
def test_compiled_sizes_on_odd_volumes(params, tmp_path):
    """compiled_sizes: the implicit GEMMs' sizes, strides, padding and dilation constexprs, one build per shape (the
    offsets table's kernel keeps run-time ones); the offsets and the taps loops on every case."""
    assert "compiled in as constants" in params.idea()
    spy = Keywords(OFFSETS, "BOUNDS") if params.k_order == "offsets" else None
    check(conv3d_op(), reference("self.conv(x)", INIT, CONV), params, [c[:2] for c in CASES], tmp_path, patch=spy,
          **tolerance(params))
    if spy:
        assert spy.seen == [bounds for *_, bounds in CASES]
