"""The transposed conv's as_conv move: where stride is 1, output padding 0 and padding at most dilation * (k - 1), the
plain conv it equals (the weight's in- and out-channels swapped, its taps flipped) on the conv family's shifted-rows
GEMM where that applies (as on a Hopper GPU: here the candidate's kc_tma_gpu is patched to say so, and the TMA kernels
run in Triton's interpreter on the CPU), else its packed implicit GEMM; elsewhere the per-phase GEMMs. Offered only
where the op's stride is 1 and it has no output padding: first with the taps loop (the conv on large planes only), third
packed (the conv at every size); checked against torch at odd sizes on both sides of the run-time choices (a spy on the
conv kernel says which side ran), with groups, dilation, padding, no bias, unbatched and fp16 inputs, 1-D, and an
epilogue with parameter operands."""

import pytest
import torch

from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.families.conv_transpose import ConvTransposeTiles
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.families.conv_transpose.test_conv_transpose2d import CONV, INIT, convt_op
from tests.propose.builtin.families.conv.test_shifted import on_hopper
from tests.propose.builtin.kernel_check import Keywords, Launches, check, moves, reference
from tests.propose.builtin.kernel_check import move_tolerance as tolerance
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

CONV_KERNEL, SHIFTED = "kc_conv2d_kernel", "kc_conv2d_shifted_kernel"
# (init args, input shape): the conv it equals
ROUTED = [((3, 4, 3), (2, 3, 5, 6)),  # stride 1, no padding: the output grows by k - 1
          ((4, 6, (3, 2), 1, (1, 0), 0, 2, False, (2, 1)), (1, 4, 5, 4)),  # groups, dilation, padding, no bias
          ((3, 5, (2, 3), 1, (1, 2)), (3, 4, 5)),  # unbatched; padding as large as dilation * (k - 1)
          ((2, 3, 1), (1, 2, 1, 1))]  # a 1x1 kernel on one pixel
# the per-phase GEMMs: a stride, output padding, padding past dilation * (k - 1)
PHASES = [((3, 4, 3, 2, 1, 1), (1, 3, 4, 5)), ((3, 4, 3, 1, 3), (1, 3, 7, 8))]


def off_hopper(spy):
    """A check patch: the candidate takes its paths as on a GPU without TMA (the packed conv, not the shifted rows),
    and `spy` watches its kernels."""
    def patch(module):
        module.kc_tma_gpu = lambda t: False
        spy(module)
    return patch


def _as_conv(op: Op):
    return [m.params for m in moves(op) if m.params.as_conv]


def _everywhere(op: Op) -> ConvTransposeTiles:
    """The as_conv move that takes the plain conv at every size (the packed one; the taps one weighs planes)."""
    return next(p for p in _as_conv(op) if p.k_order == "packed")


def test_first_where_the_stride_is_one_and_there_is_no_output_padding():
    ms = [m.params for m in moves(convt_op())]
    assert ms[0].as_conv and not ms[1].as_conv and ms[2].as_conv and sum(p.as_conv for p in ms) == 2
    assert ms[0] == ms[1].but(as_conv=True) and (ms[1].precision, ms[1].k_order) == ("tf32x3", "taps")
    assert (ms[2].precision, ms[2].k_order, ms[2].BLOCK_M, ms[2].BLOCK_N, ms[2].BLOCK_K) == (
        "tf32x3", "packed", 128, 128, 16)
    for p in (ms[0], ms[2]):
        assert "plain conv it equals" in p.idea() and p.category() == "memory" and not p.relaxed
    assert "input planes of 65536 elements or more" in ms[0].idea() and "planes" not in ms[2].idea()
    strided = Op("conv_transpose2d", {**convt_op().detail, "stride": [2, 1]})
    padded = Op("conv_transpose2d", {**convt_op().detail, "output_padding": [0, 1]})
    assert _as_conv(strided) == [] and _as_conv(padded) == []
    with pytest.raises(ValueError):
        ConvTransposeTiles(as_conv=True, one_launch=True)


def test_the_conv_it_equals_where_it_applies_and_the_phases_elsewhere(tmp_path):
    params = _everywhere(convt_op())
    ref = reference("self.conv(x)", INIT, CONV)
    spy = Keywords(CONV_KERNEL, "BLOCK_K")
    check(convt_op(), ref, params, ROUTED, tmp_path, patch=off_hopper(spy), **tolerance(params))
    assert spy.seen == [16] * len(ROUTED)
    spy = Keywords(CONV_KERNEL, "BLOCK_K")
    check(convt_op(), ref, params, PHASES, tmp_path, patch=off_hopper(spy), **tolerance(params))
    assert spy.seen == []
    check(convt_op(), ref, params, ROUTED[:2], tmp_path, rtol=1e-2, atol=1e-2, dtype=torch.float16)


def test_the_first_move_takes_the_conv_on_large_planes_only(tmp_path, monkeypatch):
    from kernelcraft.propose.builtin.families.conv_transpose import kernels

    monkeypatch.setattr(kernels, "AS_CONV_PLANES", (20, 40))  # planes of 20 and 40 elements stand for 2**16, 2**18
    params = moves(convt_op())[0].params
    assert params.as_conv and params.k_order == "taps"
    ref = reference("self.conv(x)", INIT, CONV)
    for init, shape, routed in [((3, 4, 3), (1, 3, 5, 6), True),  # 30 elements a plane, 3 in-channels: the conv
                                ((3, 4, 3), (2, 3, 4, 4), False),  # 16: the phases
                                ((64, 4, 3), (1, 64, 5, 6), False),  # 30, 64 in-channels (the taps loop): phases
                                ((64, 4, 3), (1, 64, 7, 6), True)]:  # 42: the conv
        spy = Keywords(CONV_KERNEL, "BLOCK_K")
        check(convt_op(), ref, params, [(init, shape)], tmp_path, patch=off_hopper(spy), **tolerance(params))
        assert spy.seen == ([16] if routed else []), (init, shape)


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
    return next(i for i, m in enumerate(moves(analyze(problem).single)) if m.params.as_conv
                and m.params.k_order == "packed")


def test_the_shifted_rows_where_they_apply_on_planes_of_any_size(tmp_path, monkeypatch):
    """On a Hopper GPU at 3xTF32 the conv it equals runs as shifted rows where it has one group and more than one
    tap, on the first move too whatever the planes (their rule is the packed conv's); the packed conv elsewhere."""
    from kernelcraft.propose.builtin.families.conv_transpose import kernels

    monkeypatch.setattr(kernels, "AS_CONV_PLANES", (10 ** 9, 10 ** 9))  # every plane small: no packed conv at all
    ref = reference("self.conv(x)", INIT, CONV)
    first = moves(convt_op())[0].params
    assert first.as_conv and first.precision == "tf32x3"
    for params in (first, _everywhere(convt_op())):
        spy = Launches(SHIFTED, CONV_KERNEL)
        check(convt_op(), ref, params, [ROUTED[0], ROUTED[2], PHASES[0]], tmp_path, patch=on_hopper(spy),
              rtol=1e-4, atol=1e-4)
        assert spy.seen == [SHIFTED, SHIFTED]  # the stride-2 case: the phases
    spy = Launches(SHIFTED, CONV_KERNEL)  # groups, a 1x1 kernel: the packed conv (every size on this move)
    check(convt_op(), ref, _everywhere(convt_op()), [ROUTED[1], ROUTED[3]], tmp_path, patch=on_hopper(spy),
          rtol=1e-4, atol=1e-4)
    assert spy.seen == [CONV_KERNEL, CONV_KERNEL]
    init = ("self.conv = nn.ConvTranspose2d(3, 4, (3, 2), padding=(1, 0))\n"
            "self.a = nn.Parameter(torch.randn(4, 1, 1))\nself.b = nn.Parameter(torch.randn(6))")
    forward = "return torch.tanh(self.conv(x) - self.a) * self.b"
    op = analyze(write(tmp_path, forward, init, inputs="[torch.randn(2, 3, 5, 5)]")).single
    spy = Launches(SHIFTED, CONV_KERNEL)
    check(op, reference(forward.removeprefix("return "), "self", init), moves(op)[0].params,
          [((), (2, 3, 5, 5)), ((), (3, 4, 5))], tmp_path, patch=on_hopper(spy), rtol=1e-4, atol=1e-4)
    assert spy.seen == [SHIFTED, SHIFTED]


def test_the_shifted_rows_with_compiled_sizes(tmp_path):
    params = moves(convt_op())[0].params.but(compiled_sizes=True)
    assert "sizes compiled in" in params.idea()
    spy = Keywords(SHIFTED, "HP")
    check(convt_op(), reference("self.conv(x)", INIT, CONV), params, [ROUTED[0], ROUTED[2]], tmp_path,
          patch=on_hopper(spy), rtol=1e-4, atol=1e-4)
    assert spy.seen == [9, 4]  # heights 5 and 4 padded by the conv's k - 1 - padding: 2 and 0
