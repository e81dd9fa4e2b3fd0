"""The conv family's taps K loop (k_order "taps": the kernel's taps outer, each tap's in-channels in BLOCK_K chunks
inner, over a weight permuted to (CO, KH, KW, CPG)) against nn.Conv2d / nn.Conv1d on odd shapes: channel counts
that are not a multiple of the chunk, stride, padding, dilation, groups, no bias, unbatched, fp16, epilogues with a
parameter operand and a folded batchnorm, a pooled conv; and the forward's fallback to the packed K loop where a
group has fewer in-channels than a chunk. A spy on the candidate's kernels checks which K loop ran. The moves'
chunks are narrowed (BLOCK_K 4, on a GPU 16 with 4x the channels: kernel_check.CHANNELS) so a few channels fill
several of them."""

import pytest
import torch

from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.families.conv import ConvTiles
from kernelcraft.propose.builtin.families.conv_transpose import ConvTransposeTiles
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.families.conv.test_conv import CONV, CONV1, INIT, conv1d_op, conv_op
from tests.propose.builtin.kernel_check import CHANNELS as S, Launches, assert_no_torch_compute, check, load
from tests.propose.builtin.kernel_check import match_at_shapes, more_channels, moves
from tests.propose.builtin.kernel_check import reference, render
from tests.propose.builtin.kernel_check import move_tolerance as tolerance
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

PACKED, TAPS = "kc_conv2d_kernel", "kc_conv2d_taps_kernel"


def taps_moves(op: Op) -> list:
    return [m.params for m in moves(op) if m.params.k_order == "taps"]


def narrow(op: Op, precision: str = "tf32x3") -> ConvTiles:
    """The taps move of `precision` with 4-wide channel chunks (16 on a GPU)."""
    return next(p for p in taps_moves(op) if p.precision == precision).but(BLOCK_K=4 * S)


# (init args, input shape), every group with at least 4 in-channels (times S): the taps kernel runs
TAPS_CASES = more_channels([((5, 6, 3, 1, 1), (2, 5, 5, 7)),  # 5 channels: a full chunk and a masked one; padding
              ((8, 6, 3, 2, 1), (1, 8, 7, 5)),  # two full chunks, stride 2
              ((6, 4, (3, 2), 1, (0, 1), 2, 1, False), (2, 6, 7, 7)),  # dilation 2, no bias
              ((10, 6, 3, (1, 2), 2, 1, 2), (1, 10, 5, 7)),  # groups 2 (5 in-, 3 out-channels each), padding 2
              ((5, 3, 3, 1, 1), (5, 5, 7)),  # unbatched
              ((4, 3, 1), (1, 4, 5, 7))], 2)  # 1x1 kernel
# a group with fewer in-channels than a chunk: the packed K loop
PACKED_CASES = more_channels([((3, 5, 3, 1, 1), (2, 3, 5, 7)), ((6, 4, 3, 2, 0, 1, 2), (1, 6, 7, 5))], 2)


def test_taps_moves_follow_the_first_and_the_relaxed_one_follows_the_first_relaxed():
    ms = [m.params for m in moves(conv_op()) if m.params.k_order != "shifted"]  # (the shifted move: test_shifted.py)
    assert ms[0].k_order == "packed"
    assert [(p.precision, p.BLOCK_K) for p in ms[1:3]] == [("tf32x3", 32), ("ieee", 32)]
    assert all(p.k_order == "taps" for p in ms[1:3])
    relaxed = [p for p in ms if p.precision == "tf32"]
    assert [p.k_order for p in relaxed[:2]] == ["packed", "taps"]
    assert sum(p.k_order == "taps" for p in ms) == 3
    for p in ms[1:3]:  # the idea text says what the K loop does, and tells it from the packed move
        assert "K loop over the kernel taps" in p.idea() and p.category() == "memory"
        assert p.idea() != p.but(k_order="packed").idea()
    assert ConvTiles().k_order == "packed" and "taps" not in ConvTiles().idea()


def test_k_order_is_checked():
    with pytest.raises(ValueError):
        ConvTiles(k_order="rows")
    assert ConvTransposeTiles(k_order="taps").k_order == "taps"  # its kernels have the taps loop too
    assert ConvTiles.from_json({"precision": "ieee"}).k_order == "packed"  # records before the field


@pytest.mark.parametrize("params", taps_moves(conv_op()), ids=lambda p: p.precision)
def test_taps_moves_as_offered(params, tmp_path):
    """The moves' own 32-wide chunks: 33 channels (a group's, in the second case) fill one and a 1-channel masked
    one; 3 fall back."""
    spy = Launches(PACKED, TAPS)
    check(conv_op(), reference("self.conv(x)", INIT, CONV), params,
          [((33, 5, 3, 1, 1), (1, 33, 5, 7)), ((66, 6, 3, 2, 0, 1, 2), (2, 66, 6, 7))], tmp_path, patch=spy,
          **tolerance(params))
    assert spy.seen == [TAPS, TAPS]
    spy = Launches(PACKED, TAPS)
    check(conv_op(), reference("self.conv(x)", INIT, CONV), params, PACKED_CASES, tmp_path, patch=spy,
          **tolerance(params))
    assert spy.seen == [PACKED, PACKED]


@pytest.mark.parametrize("precision", ["tf32x3", "ieee"])
def test_taps_on_odd_shapes(precision, tmp_path):
    params = narrow(conv_op(), precision)
    spy = Launches(PACKED, TAPS)
    check(conv_op(), reference("self.conv(x)", INIT, CONV), params, TAPS_CASES, tmp_path, patch=spy,
          **tolerance(params))
    assert spy.seen == [TAPS] * len(TAPS_CASES)


def test_fewer_channels_than_a_chunk_fall_back_to_the_packed_loop(tmp_path):
    spy = Launches(PACKED, TAPS)
    check(conv_op(), reference("self.conv(x)", INIT, CONV), narrow(conv_op()), PACKED_CASES, tmp_path, patch=spy,
          rtol=1e-4, atol=1e-4)
    assert spy.seen == [PACKED, PACKED]


def test_depthwise_keeps_the_stencil(tmp_path):
    spy = Launches(PACKED, TAPS, "kc_dwconv2d_kernel")
    check(conv_op(), reference("self.conv(x)", INIT, CONV), narrow(conv_op()),
          more_channels([((6, 6, 3, 1, 1, 1, 6), (1, 6, 5, 7))], 2),
          tmp_path, patch=spy, rtol=1e-4, atol=1e-4)
    assert spy.seen == ["kc_dwconv2d_kernel"]


def test_taps_half_inputs(tmp_path):
    spy = Launches(PACKED, TAPS)
    check(conv_op(), reference("self.conv(x)", INIT, CONV), narrow(conv_op()), TAPS_CASES[:2], tmp_path,
          patch=spy, rtol=1e-2, atol=1e-2, dtype=torch.float16)
    assert spy.seen == [TAPS, TAPS]


def test_taps_conv1d(tmp_path):
    spy = Launches(PACKED, TAPS)
    check(conv1d_op([["relu"]]), reference("torch.relu(self.conv(x))", INIT, CONV1), narrow(conv1d_op()),
          more_channels([((5, 6, 3, 2, 1, 2), (2, 5, 19)),  # stride 2, padding, dilation 2
                         ((8, 4, 5, 1, "same", 1, 2, False), (1, 8, 13)),  # groups 2, "same" padding, no bias
                         ((4, 3, 3), (4, 11))], 1),  # unbatched
          tmp_path, patch=spy, rtol=1e-4, atol=1e-4)
    assert spy.seen == [TAPS] * 3


def test_taps_with_epilogue_steps_and_a_pooling(tmp_path):
    op = conv_op([["relu"], ["mul", 2.0]])
    op.detail["pool"] = {"pool": "max", "dims": 2, "kernel": [2, 2], "stride": [2, 2], "padding": [0, 0],
                         "dilation": [1, 1], "ceil_mode": False, "count_include_pad": False, "output_size": None}
    spy = Launches(PACKED, TAPS)
    check(op, reference("self.pool(torch.relu(self.conv(x)) * 2.0)", INIT, CONV + "\nself.pool = nn.MaxPool2d(2)"),
          narrow(op), TAPS_CASES[:3], tmp_path, patch=spy, rtol=1e-4, atol=1e-4)
    assert spy.seen == [TAPS] * 3


STATS = "\nself.bn.running_mean.normal_()\nself.bn.running_var.uniform_(0.5, 1.5)"
AFFINE = "\nwith torch.no_grad():\n    self.bn.weight.normal_()\n    self.bn.bias.normal_()"


@pytest.mark.parametrize("forward, init, shapes", [
    ("return torch.sigmoid(self.conv(x) + self.b)", f"self.conv = nn.Conv2d({6 * S}, {4 * S}, 3, stride=2, padding=1)\n"
     f"self.b = nn.Parameter(torch.randn({4 * S}, 1, 1))", [(2, 6 * S, 5, 7), (6 * S, 7, 5)]),  # an operand; unbatched
    ("return torch.relu(self.bn(self.conv(x)) + self.b)", f"self.conv = nn.Conv2d({5 * S}, {4 * S}, 3, padding=1)\n"
     f"self.bn = nn.BatchNorm2d({4 * S})\nself.b = nn.Parameter(torch.randn({4 * S}, 1, 1))" + STATS + AFFINE,
     [(2, 5 * S, 5, 7), (1, 5 * S, 3, 3)]),  # a folded batchnorm and an operand
    ("return self.conv(x) * self.s", f"self.conv = nn.Conv1d({5 * S}, {3 * S}, 3, dilation=2)\n"
     f"self.s = nn.Parameter(torch.randn({3 * S}, 1))", [(2, 5 * S, 11)]),  # conv1d with an operand
])
def test_taps_with_parameter_operands_and_batchnorm(forward, init, shapes, tmp_path):
    """In eval mode, as the verifier runs them (the batchnorm's running statistics)."""
    problem = write(tmp_path, forward, init, f"[torch.randn{shapes[0]}]")
    op = analyze(problem).single
    assert op.kind in ("conv2d", "conv1d") and any(s[0].startswith("t") for s in op.detail["steps"])
    source = render(op, problem.source, narrow(op))
    assert_no_torch_compute(source)
    module = load(source, tmp_path)
    spy = Launches(PACKED, TAPS)
    spy(module)
    match_at_shapes(module, shapes)
    assert spy.seen == [TAPS] * len(shapes)
