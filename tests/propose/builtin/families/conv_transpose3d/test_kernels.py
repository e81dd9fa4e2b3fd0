"""The transposed 3-D conv family's kernels against nn.ConvTranspose3d / F.conv_transpose3d in Triton's interpreter
(compiled on a GPU): every move on odd volumes and every kind of hyper-parameter (stride 1 = the plain gather,
strides larger than the kernel, output_padding, dilation sharing a factor with the stride so that some phases get
no tap, groups, depthwise, no bias, unbatched input, padding that shrinks the output), an epilogue with a number
read from the module at run time, the functional spelling, and 16-bit inputs. On a GPU the reference runs with
cuDNN's TF32 off, as under the strict policy."""

import pytest
import torch

from kernelcraft.propose.base import CATEGORIES
from kernelcraft.propose.builtin.families.conv_transpose3d import Tiles
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from tests.propose.builtin.kernel_check import DEVICE, check, ident, load, moves, parts, reference, render
from tests.propose.builtin.kernel_check import move_tolerance as tolerance
from tests.propose.builtin.names_check import check_names

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

INIT = "self, cin, cout, k, s=1, p=0, op=0, g=1, b=True, d=1"
CONV = ("self.conv = nn.ConvTranspose3d(cin, cout, k, stride=s, padding=p, output_padding=op, groups=g, bias=b, "
        "dilation=d)")
# (init args, input shape)
CASES = [((3, 4, 3, 2, 1, 1), (2, 3, 3, 4, 5)),  # the suite's 2x upsampling: kernel 3, stride 2, padding 1
         ((3, 5, 2), (1, 3, 3, 2, 4)),  # stride 1: one phase, every tap (the gather formulation)
         ((4, 6, (3, 2, 1), (2, 3, 1), (1, 0, 0), (1, 2, 0), 2, False, (2, 1, 1)), (1, 4, 3, 4, 3)),  # groups, no bias
         ((4, 6, 3, 2, 0, 0, 1, True, 2), (1, 4, 3, 2, 3)),  # dilation 2, stride 2: odd phases get bias only
         ((6, 6, 2, 3, 1, 2, 6), (2, 6, 2, 3, 2)),  # depthwise; stride 3 over 2 taps: a phase per axis has none
         ((3, 5, (1, 2, 3), (3, 1, 2), (0, 1, 1)), (3, 2, 3, 4)),  # unbatched (C, D, H, W)
         ((2, 3, 3, 1, 2), (1, 2, 4, 3, 5))]  # padding as large as the kernel: the output shrinks


def convt_op(steps=()) -> Op:
    return Op("conv_transpose3d", {"stride": [1, 1, 1], "padding": [0, 0, 0], "output_padding": [0, 0, 0],
                                   "dilation": [1, 1, 1], "groups": 1, "module": "conv", "groups_attr": None,
                                   "weight": "conv.weight", "bias": "conv.bias", "steps": [list(s) for s in steps]})


def test_moves_are_3xtf32_first_distinct_and_tf32_is_marked():
    ms = moves(convt_op())
    assert len({m.text for m in ms}) == len(ms) >= 6 and all(m.category in CATEGORIES for m in ms)
    assert ms[0].params.precision == "tf32x3" and not ms[0].relaxed
    assert {m.params.precision for m in ms} == {"ieee", "tf32x3", "tf32"}
    assert [m.params.precision == "tf32" for m in ms] == [m.relaxed for m in ms]
    assert {m.params.one_launch for m in ms} == {True, False}
    assert len({(m.params.BLOCK_M, m.params.BLOCK_N, m.params.BLOCK_K) for m in ms}) >= 3
    strict = BuiltinProposer("cpu").moves(convt_op(), "triton")
    assert strict and not any(m.relaxed for m in strict)
    with pytest.raises(ValueError, match="precision"):
        Tiles(precision="bf16x9")


@pytest.mark.parametrize("params", [m.params for m in moves(convt_op())], ids=ident)
def test_every_move_matches_torch(params, tmp_path):
    cases = CASES[::2] if params.relaxed else CASES  # the relaxed moves repeat the exact ones' tiles
    check(convt_op(), reference("self.conv(x)", INIT, CONV), params, cases, tmp_path, **tolerance(params))


def test_the_launches_a_move_makes(tmp_path):
    ms = moves(convt_op())
    per_phase = render(convt_op(), reference("self.conv(x)", INIT, CONV), ms[0].params)
    assert per_phase.count("kc_conv_transpose3d_kernel[grid](") == 1 and "for rd in range(" in per_phase
    one = next(m for m in ms if m.params.one_launch)
    source = render(convt_op(), reference("self.conv(x)", INIT, CONV), one.params)
    assert source.count("kc_conv_transpose3d_phases_kernel[grid](") == 1 and "for rd in" not in source


def test_an_epilogue_with_a_number_read_at_run_time(tmp_path):
    """steps fold into the kernel; the scale is the module's at run time, not the traced one (names_check)."""
    op = convt_op([["tanh"], ["mul", "self.scale"], ["add", 1.0]])
    ref = reference("torch.tanh(self.conv(x)) * self.scale + 1.0", INIT + ", scale=0.5", CONV + "\nself.scale = scale")
    for params in (moves(op)[0].params, next(m.params for m in moves(op) if m.params.one_launch)):
        source = render(op, ref, params)
        check_names(source, {"scale"})
        module = load(source, tmp_path)
        for scale, (init, shape) in zip((0.5, -1.75), CASES[:2]):
            torch.manual_seed(0)
            want_model = module.Model(*init, scale=scale).to(DEVICE)
            new = module.ModelNew(*init, scale=0.5).to(DEVICE)
            new.load_state_dict(want_model.state_dict())
            new.scale = scale
            x = torch.randn(shape, device=DEVICE)
            with torch.no_grad():
                torch.testing.assert_close(new(x), want_model(x), rtol=1e-4, atol=1e-4)


def test_functional_values_and_groups_by_attribute(tmp_path):
    op = Op("conv_transpose3d", {"stride": [2, 1, 3], "padding": [1, 0, 2], "output_padding": [1, 0, 0],
                                 "dilation": [1, 2, 2], "groups": 2, "module": None, "groups_attr": "g",
                                 "weight": "w", "bias": "b", "steps": [["relu"]]})
    ref = reference("torch.relu(F.conv_transpose3d(x, self.w, self.b, (2, 1, 3), (1, 0, 2), (1, 0, 0), self.g, "
                    "(1, 2, 2)))", "self", "self.g = 2\nself.w = nn.Parameter(torch.randn(4, 3, 3, 2, 4))\n"
                                           "self.b = nn.Parameter(torch.randn(6))")
    for params in (moves(op)[0].params, next(m.params for m in moves(op) if m.params.one_launch)):
        check(op, ref, params, [((), (2, 4, 3, 5, 4)), ((), (1, 4, 1, 1, 1)), ((), (4, 2, 3, 2))], tmp_path,
              rtol=1e-4, atol=1e-4)


# bf16 on a GPU only: Triton's interpreter computes a bf16 tl.dot wrongly (numpy has no bf16)
@pytest.mark.parametrize("dtype", [torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else []), ids=str)
def test_16_bit_inputs(dtype, tmp_path):
    ms = moves(convt_op())
    tol = 1e-2 if dtype == torch.float16 else 4e-2
    for params in (ms[0].params, next(m.params for m in ms if m.params.one_launch)):
        check(convt_op([["sigmoid"]]), reference("torch.sigmoid(self.conv(x))", INIT, CONV), params, CASES[:3],
              tmp_path, rtol=tol, atol=tol, dtype=dtype)


def test_rendered_names_follow_the_chain_suffix():
    from kernelcraft.propose.builtin.family import Names
    from kernelcraft.propose.builtin import registry

    for m in moves(convt_op())[:3]:
        rendered = registry.parts(convt_op(), m.params, Names("_op4"))
        kernels = [b for b in rendered.blocks if not isinstance(b, str)]
        assert kernels and all(k.name.endswith("_op4") for k in kernels)
        assert all(k.name + "[" in rendered.body for k in kernels)  # launched (on its grid, or a copy's own)
    assert parts(convt_op())[0] == Tiles(precision="tf32x3", as_conv=True).to_json()  # the first move by default
