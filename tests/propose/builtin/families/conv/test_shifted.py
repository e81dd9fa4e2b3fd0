"""The conv family's shifted-rows GEMM (the "shifted" K order): x and the weight copied once into padded
channels-last TF32 parts, each step's boxes loaded through TMA descriptors. It runs only on a Hopper GPU
(kc_tma_gpu); here the loaded candidate's kc_tma_gpu says yes, so the TMA kernels run in Triton's interpreter on the
CPU (on a GPU, as they are). Checked against torch on odd shapes: padding, dilation, no bias, in-channels not a
multiple of 4 and on both sides of 16, out-channels on both sides of 64, unbatched and 1-D inputs, a fused epilogue
with a folded batchnorm and a parameter operand; strides folded into the channels (space to depth); and the forward's
fallbacks to the packed GEMM (a stride that does not fold, groups, a 1x1 kernel, fp16), a spy saying which kernel
ran."""

import pytest
import torch

from kernelcraft.propose.builtin.families.conv import ConvTiles
from kernelcraft.propose.builtin.families.conv.shifted import FOLD_WASTE, TILES, kc_conv_fold
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.families.conv.test_conv import CONV, INIT, conv1d_op, conv_op
from kernelcraft.propose.builtin.analyze import analyze
from tests.propose.builtin.families.conv.test_epilogue import AFFINE, STATS
from tests.propose.builtin.kernel_check import DEVICE, Keywords, Launches, check, load, moves, reference, render
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SHIFTED, PACKED = "kc_conv2d_shifted_kernel", "kc_conv2d_kernel"
# (init args (cin, cout, k, s, p, d, g, bias), input shape): the shifted GEMM runs
RUNS = [((3, 5, 3, 1, 1), (2, 3, 9, 7)),  # 3 in-channels (padded to 4), padding keeps the size
        ((6, 7, (3, 2), 1, (2, 1), (2, 1), 1, False), (1, 6, 10, 9)),  # dilation, uneven padding, no bias
        ((20, 9, (2, 3), 1, 0), (2, 20, 5, 11)),  # 20 in-channels: 32-wide K steps over a masked chunk
        ((5, 70, 3, 1, 1), (1, 5, 6, 7)),  # 70 out-channels: the 128-wide tile
        ((4, 3, 3, 1, 2), (4, 7, 6))]  # unbatched
# the packed implicit GEMM instead: a stride, groups, a 1x1 kernel (more than direct.py's 4 in-channels a group: fewer
# take the direct loop, test_direct.py)
FALLS_BACK = [((6, 5, 3, 2, 1), (2, 6, 9, 7)), ((10, 6, 3, 1, 1, 1, 2), (1, 10, 6, 5)), ((6, 4, 1), (2, 6, 5, 6))]


def shifted(op: Op) -> ConvTiles:
    return next(m.params for m in moves(op) if m.params.k_order == "shifted")


def on_hopper(spy):
    """A check patch: the candidate takes its TMA paths as on a Hopper GPU, and `spy` watches its GEMM kernels."""
    def patch(module):
        module.kc_tma_gpu = lambda t: True
        spy(module)
    return patch


def test_offered_first_and_only_as_3xtf32():
    ms = [m.params for m in moves(conv_op())]
    assert ms[0].k_order == "shifted" and ms[0].precision == "tf32x3" and sum(p.k_order == "shifted" for p in ms) == 1
    assert "shifted box" in ms[0].idea() and ms[0].category() == "memory" and not ms[0].relaxed
    # where it does not apply, the first move is the packed move it replaced, on the same tiles; the first move
    # builds its kernels per shape, the second is the same packed move built once for every shape
    assert ms[0].compiled_sizes and "compiled in" in ms[0].idea()
    assert ms[1] == ms[0].but(k_order="packed", compiled_sizes=False)
    with pytest.raises(ValueError, match="tf32x3"):
        ConvTiles(precision="ieee", k_order="shifted")
    assert "COPG <= 64" in TILES


def launched(cases, tmp_path, tol=1e-4, dtype=None) -> list[str]:
    """The GEMM kernels a plain conv's shifted move launched on `cases` (as on a Hopper GPU), checked against torch."""
    spy = Launches(SHIFTED, PACKED, "kc_conv2d_direct_kernel")
    check(conv_op(), reference("self.conv(x)", INIT, CONV), shifted(conv_op()), cases, tmp_path,
          patch=on_hopper(spy), rtol=tol, atol=tol, dtype=dtype)
    return spy.seen


def test_the_shifted_gemm_where_it_applies(tmp_path):
    assert launched(RUNS, tmp_path) == [SHIFTED] * len(RUNS)


def test_the_packed_gemm_elsewhere(tmp_path):
    assert launched(FALLS_BACK, tmp_path) == [PACKED] * len(FALLS_BACK)
    if DEVICE == "cuda":  # fp16 keeps the packed GEMM on the tensor cores as they are
        assert launched(RUNS[:1], tmp_path, 1e-2, torch.float16) == [PACKED]


def test_an_epilogue_a_batchnorm_and_an_operand(tmp_path):
    spy = Launches(SHIFTED, PACKED)
    op = conv_op([["relu"], ["mul", 2.0]])
    check(op, reference("torch.relu(self.conv(x)) * 2.0", INIT, CONV), shifted(op), RUNS[:2], tmp_path,
          patch=on_hopper(spy), rtol=1e-4, atol=1e-4)
    assert spy.seen == [SHIFTED] * 2
    forward = "return torch.tanh(self.bn(self.conv(x)) + self.b)"
    init = ("self.conv = nn.Conv2d(3, 5, 3, padding=1, bias=False)\nself.bn = nn.BatchNorm2d(5)" + STATS + AFFINE
            + "\nself.b = nn.Parameter(torch.randn(5, 1, 1))")
    problem = write(tmp_path, forward, init, inputs="[torch.randn(2, 3, 9, 7)]")
    op = analyze(problem).single
    assert op.detail.get("bn") and op.detail["steps"]
    spy = Launches(SHIFTED, PACKED)
    module = load(render(op, problem.source, shifted(op)), tmp_path)
    on_hopper(spy)(module)
    for shape in ((2, 3, 9, 7), (1, 3, 4, 11)):
        torch.manual_seed(0)
        model = module.Model().to(DEVICE).eval()
        new = module.ModelNew().to(DEVICE).eval()
        new.load_state_dict(model.state_dict())
        x = torch.randn(shape, device=DEVICE)
        with torch.no_grad():
            torch.testing.assert_close(new(x), model(x), rtol=1e-4, atol=1e-4)
    assert spy.seen == [SHIFTED] * 2


def test_a_1d_conv(tmp_path):
    spy = Launches(SHIFTED, PACKED)
    ref = reference("self.conv(x)", "self, cin, cout, k, p=0, d=1", "self.conv = nn.Conv1d(cin, cout, k, padding=p, "
                    "dilation=d)")
    check(conv1d_op(), ref, shifted(conv1d_op()), [((3, 5, 3, 1, 2), (2, 3, 17)), ((6, 4, 5), (6, 30))], tmp_path,
          patch=on_hopper(spy), rtol=1e-4, atol=1e-4)
    assert spy.seen == [SHIFTED] * 2


def test_infinities_and_nan_pass_as_torch_passes_them(tmp_path):
    """An infinite input's remainder is no number: the split gives it 0 and the kernel drops a non-finite remainder
    product, so outputs are inf or NaN exactly where torch's are."""
    from tests.propose.builtin.kernel_check import load

    spy = Launches(SHIFTED, PACKED)
    module = load(render(conv_op(), reference("self.conv(x)", INIT, CONV), shifted(conv_op())), tmp_path)
    on_hopper(spy)(module)
    torch.manual_seed(0)
    model = module.Model(3, 4, 3, 1, 1).to(DEVICE).eval()
    new = module.ModelNew(3, 4, 3, 1, 1).to(DEVICE).eval()
    new.load_state_dict(model.state_dict())
    x = torch.randn(2, 3, 9, 7, device=DEVICE)
    x[0, 1, 2, 3] = float("inf")
    x[1, 0, 5, 5] = float("nan")
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x), rtol=1e-4, atol=1e-4, equal_nan=True)
    assert spy.seen == [SHIFTED]



def test_few_channels_pack_an_axis_taps_into_k(tmp_path):
    """8 or fewer in-channels: K = (the last axis of more than one tap, channels), one box of overlapping rows a step
    (PACK its taps); more channels, or a box past 64 wide, K = channels (PACK 1). Dilation along the packed axis
    spaces its taps' rows; a kernel of one column packs the rows' taps."""
    cases = [(((3, 5, 3, 1, 1), (2, 3, 9, 7)), 3),  # 3 in-channels, 3 columns: a 4 x 4 box
             (((2, 4, (3, 1), 1, (1, 0)), (2, 2, 6, 5)), 3),  # one column: the rows' taps, WP rows apart
             (((5, 6, (2, 3), 1, 0, (1, 2)), (1, 5, 5, 9)), 3),  # dilated columns: taps 2 rows apart; 8-wide channels
             (((3, 4, (2, 7)), (1, 3, 4, 12)), 7),  # 7 taps: an 8 x 4 box
             (((8, 3, (2, 11)), (1, 8, 3, 14)), 1),  # 8 channels x 16 taps: past 64, so K = channels
             (((9, 3, 3, 1, 1), (1, 9, 5, 6)), 1)]  # 9 channels: K = channels
    spy = Keywords(SHIFTED, "PACK")
    check(conv_op(), reference("self.conv(x)", INIT, CONV), shifted(conv_op()), [c for c, _ in cases], tmp_path,
          patch=on_hopper(spy), rtol=1e-4, atol=1e-4)
    assert spy.seen == [pack for _, pack in cases]


# strided convs the fold takes (init args, input shape): AlexNet's 11 x 11 at stride 4 (a 12 x 12 folded kernel, 3
# taps an axis over 48 channels), ResNet's 7 x 7 at stride 2 with odd sizes, uneven strides and kernels, a stride past
# the kernel's extent along one axis (its taps and some rows never read), a 5 x 5 at stride 2 over 12 channels
# (K = 48 channels a tap, 32-wide steps), unbatched
FOLDS = [((3, 5, 11, 4, 2), (2, 3, 27, 25)),
         ((3, 6, 7, 2, 3), (1, 3, 13, 12)),
         ((4, 5, (5, 3), (2, 3), (1, 0)), (2, 4, 11, 14)),
         ((2, 3, (2, 4), (3, 2), (1, 2)), (1, 2, 10, 9)),
         ((12, 70, 5, 2, 2, 1, 1, False), (1, 12, 9, 8)),
         ((3, 4, 7, 2, 3), (3, 11, 10))]


def test_strides_fold_into_the_channels(tmp_path):
    """A stride folds into the channels where the folded kernel wastes little (kc_conv_fold); the results torch's,
    run by the shifted GEMM over ceil(k / s) taps an axis; 3 x 3 at stride 2 (1.78 times the taps) keeps its GEMM."""
    assert launched(FOLDS, tmp_path) == [SHIFTED] * len(FOLDS)
    assert launched([((6, 5, 3, 2, 1), (2, 6, 9, 7)), ((3, 5, 5, 2, 1, 2), (1, 3, 12, 12))], tmp_path) == [
        PACKED, "kc_conv2d_direct_kernel"]  # dilated: no fold; 3 channels, K 75: the direct kernel


def test_the_fold_rule():
    assert kc_conv_fold((1, 1), (2, 1), (3, 3), 3, 0, FOLD_WASTE) == (1, 1)  # stride 1: no fold, any dilation
    assert kc_conv_fold((1, 1), (1, 1), (1, 1), 3, 0, FOLD_WASTE) is None  # one tap
    assert kc_conv_fold((4, 4), (1, 1), (11, 11), 3, 0, FOLD_WASTE) == (4, 4)  # 144 / 121
    assert kc_conv_fold((2, 2), (1, 1), (7, 7), 3, 0, FOLD_WASTE) == (2, 2)  # 64 / 49
    assert kc_conv_fold((2, 2), (1, 1), (3, 3), 64, 0, FOLD_WASTE) is None  # 16 / 9
    assert kc_conv_fold((2, 2), (1, 1), (2, 2), 3, 0, FOLD_WASTE) is None  # one folded tap: a plain GEMM
    assert kc_conv_fold((4, 4), (1, 1), (11, 11), 3, 0, 0) is None  # the transposed convs: strides never fold
    assert kc_conv_fold((4, 4), (2, 1), (11, 11), 3, 0, FOLD_WASTE) is None  # dilated
    assert kc_conv_fold((1, 2, 2), (1, 1, 1), (3, 7, 7), 3, 8, FOLD_WASTE) == (1, 2, 2)  # 3-D: 12 folded channels
    assert kc_conv_fold((1, 1, 1), (1, 1, 1), (3, 3, 3), 3, 8, FOLD_WASTE) is None  # 3-D: 8 channels or fewer


def test_compiled_sizes(tmp_path):
    """compiled_sizes: the shifted kernel's sizes are constexprs (a build per input shape), passed as such: each case
    its own padded width, the results torch's; only on a move that runs the shifted rows."""
    params = shifted(conv_op()).but(compiled_sizes=True)
    assert "compiled in as constants" in params.idea()
    spy = Keywords(SHIFTED, "WP")
    check(conv_op(), reference("self.conv(x)", INIT, CONV), params, RUNS[:3], tmp_path, patch=on_hopper(spy),
          rtol=1e-4, atol=1e-4)
    assert spy.seen == [9, 11, 11]  # widths 7, 9 and 11 padded by 1, 1 and 0
    from kernelcraft.propose.builtin.families.conv_transpose import ConvTransposeTiles

    with pytest.raises(ValueError, match="compiled_sizes"):  # a transposed conv's compiles only the shifted rows
        ConvTransposeTiles(precision="tf32x3", compiled_sizes=True)
