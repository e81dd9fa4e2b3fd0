"""The transposed-conv family's taps K loop (k_order "taps": a phase's taps outer, each tap's in-channels in BLOCK_K
chunks inner, over a weight permuted to (CO, KH, KW, CPG)) against nn.ConvTranspose2d / nn.ConvTranspose1d /
F.conv_transpose2d on odd shapes: strides 1, 2 and 3, padding, output_padding, dilation sharing a factor with the
stride (phases no tap reaches: bias and epilogue only), groups, channel counts that are and are not a multiple of the
chunk, no bias, unbatched, fp16, a launch per phase and every phase in one launch, epilogues with constants and
parameter operands; and the forward's fallback to the packed K loop where a group has fewer in-channels than a
chunk (depthwise included). A spy on the candidate's kernels checks which K loop ran. The chunks are narrowed
(BLOCK_K 4, on a GPU 16 with 4x the channels: kernel_check.CHANNELS) so a few channels fill several of them."""

import pytest
import torch

from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.families.conv_transpose import ConvTransposeTiles
from kernelcraft.propose.builtin.families.conv_transpose.kernels import kc_phase_taps
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.families.conv_transpose.test_conv_transpose2d import CONV, INIT, convt_op
from tests.propose.builtin.kernel_check import CHANNELS as S, Launches, assert_no_torch_compute, check, load
from tests.propose.builtin.kernel_check import match_at_shapes, more_channels, moves, reference, render
from tests.propose.builtin.kernel_check import move_tolerance as tolerance
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

PACKED, TAPS = "kc_conv_transpose2d_kernel", "kc_conv_transpose2d_taps_kernel"
ONE_PACKED, ONE_TAPS = "kc_conv_transpose2d_phases_kernel", "kc_conv_transpose2d_phases_taps_kernel"


def taps_moves(op: Op) -> list:
    return [m.params for m in moves(op) if m.params.k_order == "taps" and not m.params.as_conv]


def narrow(op: Op, precision: str = "tf32x3") -> ConvTransposeTiles:
    """The taps move of `precision` with 4-wide channel chunks (16 on a GPU), a launch per phase (the first move's
    one launch for short phases: test_the_first_move_runs_short_phases_in_one_launch)."""
    return next(p for p in taps_moves(op) if p.precision == precision).but(BLOCK_K=4 * S, short_one_launch=False)


# ((cin, cout, k, s, p, op, g, bias, d), input shape), every group with at least two 4-channel chunks (times S): the
# taps kernel runs
TAPS_CASES = more_channels([
    ((9, 6, 3, 1, 1), (2, 9, 5, 7)),  # stride 1 (one phase, every tap); 9 channels: two full chunks and a masked one
    ((8, 6, 4, 2, 1), (1, 8, 5, 6)),  # the suite's 2x upsampling: kernel 4, stride 2, padding 1; two full chunks
    ((10, 4, (3, 2), (2, 3), (1, 0), (1, 2), 1, False, (2, 1)), (2, 10, 5, 4)),  # dilation 2 with stride 2: odd
    # rows get no tap; stride 3 along W with output_padding 2; no bias
    ((18, 6, 3, 3, 2, 1, 2), (1, 18, 4, 5)),  # groups 2 (9 in-, 3 out-channels each), stride 3, output_padding
    ((9, 3, 3, 2, 1), (9, 4, 6)),  # unbatched
    ((8, 3, 1, 2), (1, 8, 3, 5)),  # 1x1 kernel, stride 2: only phase (0, 0) has a tap
    ((10, 5, (1, 3), (3, 1), (0, 1)), (2, 10, 3, 4)),  # stride 3 over a 1-tall kernel
    ((8, 3, 3, 1, 2), (1, 8, 4, 4))], 2)  # padding as large as the kernel: the output shrinks
# a group with fewer in-channels than two chunks: the packed K loop
PACKED_CASES = more_channels([((3, 5, 3, 2, 1), (2, 3, 5, 7)),  # 3 channels
                              ((6, 4, 3, 2, 0, 1, 2), (1, 6, 7, 5)),  # groups 2: 3 each
                              ((7, 4, 3, 2, 1), (1, 7, 4, 5)),  # 7 channels: one full chunk, not two
                              ((6, 6, 3, 3, 2, 1, 6), (2, 6, 5, 5))], 2)  # depthwise


def test_phase_taps_are_the_taps_that_reach_the_phase():
    """kc_phase_taps (the host's, which the taps loop walks): tap k reaches phase r where (r + p - k*d) % s == 0."""
    for s, p, d, k in [(1, 0, 1, 3), (2, 1, 1, 4), (2, 0, 2, 3), (3, 2, 1, 3), (5, 1, 2, 3), (3, 1, 2, 4), (2, 0, 1, 1)]:
        for r in range(s):
            first, step, count, base, shift = kc_phase_taps(r, s, p, d, k)
            want = [t for t in range(k) if (r + p - t * d) % s == 0]
            assert [first + i * step for i in range(count)] == want, (s, p, d, k, r)
            for i, t in enumerate(want):  # output r + s*j reads input j + base - i*shift through tap t
                assert (r + p - t * d) // s == base - i * shift


def test_the_taps_move_comes_first_then_the_packed_one():
    """Measured at published sizes (the family's moves docstring): the 3xTF32 taps move leads the transposed conv
    (the as_conv move after it: test_as_conv.py)."""
    ms = [m.params for m in moves(convt_op()) if not m.params.as_conv]
    assert [(p.precision, p.k_order, p.BLOCK_K, p.one_launch) for p in ms[:3]] == [
        ("tf32x3", "taps", 32, False), ("tf32x3", "packed", 16, False), ("ieee", "taps", 32, False)]
    assert [p.k_order for p in ms if p.precision == "tf32"][:2] == ["packed", "taps"]
    assert sum(p.k_order == "taps" for p in ms) == 3
    assert all(p.k_order == "packed" for p in ms if p.one_launch)
    for p in (ms[0], ms[2]):  # the idea text says what the K loop does, and tells it from the packed move
        assert "K loop over the kernel taps" in p.idea() and "phase" in p.idea() and p.category() == "memory"
        assert p.idea() != p.but(k_order="packed").idea()
    one = ConvTransposeTiles(one_launch=True)
    assert "K loop over the kernel taps" in one.but(k_order="taps").idea() and "K loop over" not in one.idea()
    assert ConvTransposeTiles.from_json({"precision": "ieee"}).k_order == "packed"  # records before the field
    with pytest.raises(ValueError):
        ConvTransposeTiles(k_order="rows")


@pytest.mark.parametrize("params", taps_moves(convt_op()), ids=lambda p: p.precision)
def test_taps_moves_as_offered(params, tmp_path):
    """The moves' own 32-wide chunks: 65 channels (a group's, in the second case) fill two and a 1-channel masked
    one; fewer fall back (a launch per phase here: the first move's one launch for short phases is tested below)."""
    params = params.but(short_one_launch=False)
    spy = Launches(PACKED, TAPS)
    check(convt_op(), reference("self.conv(x)", INIT, CONV), params,
          [((65, 5, 3, 2, 1, 1), (1, 65, 4, 5)), ((130, 6, 4, 2, 1, 0, 2), (2, 130, 3, 4))], tmp_path, patch=spy,
          **tolerance(params))
    assert set(spy.seen) == {TAPS}
    spy = Launches(PACKED, TAPS)
    check(convt_op(), reference("self.conv(x)", INIT, CONV), params, PACKED_CASES[:2], tmp_path, patch=spy,
          **tolerance(params))
    assert set(spy.seen) == {PACKED}


@pytest.mark.parametrize("precision", ["tf32x3", "ieee"])
def test_taps_on_odd_shapes(precision, tmp_path):
    params = narrow(convt_op(), precision)
    spy = Launches(PACKED, TAPS)
    check(convt_op(), reference("self.conv(x)", INIT, CONV), params, TAPS_CASES, tmp_path, patch=spy,
          **tolerance(params))
    assert set(spy.seen) == {TAPS}


@pytest.mark.parametrize("precision", ["tf32x3", "ieee"])
def test_taps_in_one_launch(precision, tmp_path):
    """The one-launch kernel (every phase on a grid axis, its taps worked out per program) with the taps loop."""
    params = narrow(convt_op(), precision).but(one_launch=True)
    spy = Launches(ONE_PACKED, ONE_TAPS)
    check(convt_op([["tanh"]]), reference("torch.tanh(self.conv(x))", INIT, CONV), params,
          TAPS_CASES[1:4] + PACKED_CASES[:1], tmp_path, patch=spy, **tolerance(params))
    assert spy.seen == [ONE_TAPS] * 3 + [ONE_PACKED]


def test_fewer_channels_than_a_chunk_fall_back_to_the_packed_loop(tmp_path):
    spy = Launches(PACKED, TAPS)
    check(convt_op(), reference("self.conv(x)", INIT, CONV), narrow(convt_op()), PACKED_CASES, tmp_path, patch=spy,
          rtol=1e-4, atol=1e-4)
    assert set(spy.seen) == {PACKED}


def test_taps_half_inputs(tmp_path):
    spy = Launches(PACKED, TAPS)
    check(convt_op(), reference("self.conv(x)", INIT, CONV), narrow(convt_op()), TAPS_CASES[:2], tmp_path,
          patch=spy, rtol=1e-2, atol=1e-2, dtype=torch.float16)
    assert set(spy.seen) == {TAPS}


def test_taps_with_epilogue_steps_and_functional_values(tmp_path):
    op = convt_op([["tanh"], ["add", 1.0]])
    spy = Launches(PACKED, TAPS)
    check(op, reference("torch.tanh(self.conv(x)) + 1.0", INIT, CONV), narrow(op), TAPS_CASES[1:4], tmp_path,
          patch=spy, rtol=1e-4, atol=1e-4)
    op = Op("conv_transpose2d", {"stride": [2, 3], "padding": [1, 2], "output_padding": [1, 0], "dilation": [1, 2],
                                 "groups": 2, "module": None, "groups_attr": "g", "weight": "w", "bias": "b",
                                 "steps": []})
    ref = reference("F.conv_transpose2d(x, self.w, self.b, (2, 3), (1, 2), (1, 0), self.g, (1, 2))", "self",
                    f"self.g = 2\nself.w = nn.Parameter(torch.randn({16 * S}, 3, 3, 4))\n"
                    "self.b = nn.Parameter(torch.randn(6))")
    check(op, ref, narrow(op, "ieee"), [((), (2, 16 * S, 5, 3)), ((), (1, 16 * S, 1, 1))], tmp_path, patch=spy,
          rtol=1e-4, atol=1e-4)
    assert set(spy.seen) == {TAPS}


def _check_problem(forward: str, init: str, shapes: list, kind: str, tmp_path, one_launch: bool = False) -> None:
    """The single op read from a written reference, rendered on the narrowed taps move, against the reference at
    each input shape (in eval mode, as the verifier runs it); the taps kernel must run for each."""
    problem = write(tmp_path, forward, init, f"[torch.randn{shapes[0]}]")
    op = analyze(problem).single
    assert op.kind == kind, op
    source = render(op, problem.source, narrow(op).but(one_launch=one_launch))
    assert_no_torch_compute(source)
    module = load(source, tmp_path)
    spy = Launches(*((ONE_PACKED, ONE_TAPS) if one_launch else (PACKED, TAPS)))
    spy(module)
    match_at_shapes(module, shapes)
    assert set(spy.seen) == {ONE_TAPS if one_launch else TAPS}


CONV1 = "self.conv = nn.ConvTranspose1d"


@pytest.mark.parametrize("args, shapes", [
    (f"{9 * S}, 6, 3", [(2, 9 * S, 11), (9 * S, 4)]),  # stride 1; unbatched
    (f"{8 * S}, 6, 5, stride=3, padding=2, output_padding=1", [(2, 8 * S, 9), (1, 8 * S, 1)]),
    (f"{16 * S}, 4, 3, stride=2, dilation=2, groups=2, bias=False", [(2, 16 * S, 10)]),  # phase 1 gets no tap
], ids=["stride1", "stride3", "dilated-groups"])
def test_taps_conv_transpose1d(args, shapes, tmp_path):
    _check_problem("return torch.relu(self.conv(x))", f"{CONV1}({args})", shapes, "conv_transpose1d", tmp_path)


@pytest.mark.parametrize("forward, init, shapes", [
    ("return torch.sigmoid(self.conv(x) + self.b)", f"self.conv = nn.ConvTranspose2d({10 * S}, 4, 3, stride=2, "
     "padding=1, output_padding=1)\nself.b = nn.Parameter(torch.randn(4, 1, 1))",
     [(2, 10 * S, 5, 4), (10 * S, 3, 3)]),  # per channel (one vector per tile); unbatched
    ("return torch.tanh(self.conv(x) - self.a) * self.b", f"self.conv = nn.ConvTranspose2d({9 * S}, 4, (3, 2), "
     "stride=(3, 2), padding=(1, 0))\nself.a = nn.Parameter(torch.randn(4, 10, 6))\n"
     "self.b = nn.Parameter(torch.randn(10, 1))", [(2, 9 * S, 4, 3), (9 * S, 4, 3)]),  # per output; along the height
    ("return self.conv(x) * self.s", f"{CONV1}({9 * S}, 3, 3, stride=2)\nself.s = nn.Parameter(torch.randn(3, 1))",
     [(2, 9 * S, 7)]),  # 1-D with an operand
])
def test_taps_with_parameter_operands(forward, init, shapes, tmp_path):
    kind = "conv_transpose1d" if "ConvTranspose1d" in init else "conv_transpose2d"
    _check_problem(forward, init, shapes, kind, tmp_path)


def test_taps_with_an_operand_in_one_launch(tmp_path):
    _check_problem("return torch.relu(self.conv(x) * self.a + self.b)",
                   f"self.conv = nn.ConvTranspose2d({16 * S}, 6, 3, stride=2, groups=2, dilation=2)\n"
                   "self.a = nn.Parameter(torch.randn(6, 1, 1))\nself.b = nn.Parameter(torch.randn(13))",
                   [(2, 16 * S, 5, 5), (16 * S, 3, 5)], "conv_transpose2d", tmp_path, one_launch=True)


def test_the_first_move_runs_short_phases_in_one_launch(tmp_path):
    """short_one_launch (the first move): where a group's in-channels times an output's mean taps are at most
    SHORT_PHASES channel tiles, every phase in one launch; else a launch per phase, the taps loop where the channels
    fill two chunks."""
    from kernelcraft.propose.builtin.families.conv_transpose.kernels import kc_mean_taps

    params = moves(convt_op())[0].params
    assert params.short_one_launch and "every phase in one launch" in params.idea()
    assert kc_mean_taps(5, 1, 2, 3) == 0.6  # phases 4, 1, 3 get a tap each
    assert kc_mean_taps(2, 1, 1, 3) == 1.5 and kc_mean_taps(2, 1, 2, 3) == 1.5 and kc_mean_taps(1, 0, 1, 4) == 4
    cases = {  # stride 5, dilation 2 (level 1's 81 in small): 4 x 0.6 x 0.6 = 1.44 <= 16, one launch
        ONE_PACKED: ((4, 8, 3, 5, 1, 0, 1, False, 2), (2, 4, 6, 7)),
        # 1-D-like stride 2, dilation 2 over one-row images (79's): 8 x 1 x 1.5 = 12 <= 16
        ONE_PACKED + "-1d": ((8, 16, (1, 3), (1, 2), (0, 1), 0, 1, True, (1, 2)), (1, 8, 1, 9)),
        PACKED: ((40, 8, 3, 2, 1), (1, 40, 5, 6)),  # 40 x 1.5 x 1.5 = 90 > 16: a launch each, packed (one chunk)
        TAPS: ((80, 8, 3, 2, 1), (1, 80, 3, 4))}  # 180 > 16, two chunks: the taps loop
    for kernel, case in cases.items():
        spy = Launches(PACKED, TAPS, ONE_PACKED, ONE_TAPS)
        check(convt_op(), reference("self.conv(x)", INIT, CONV), params, [case], tmp_path, patch=spy,
              **tolerance(params))
        assert set(spy.seen) == {kernel.removesuffix("-1d")}, (case, spy.seen)
