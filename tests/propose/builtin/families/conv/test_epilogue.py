"""What a convolution's epilogue takes beyond pointwise steps: an eval batchnorm right after it (a per-channel
scale and shift before the steps) and parameter operands (x + self.bias, broadcast by torch's rules, read at
the output's coordinates): the implicit-GEMM and depthwise kernels, 1-D and 2-D, batched or not, against the
reference on odd shapes; and where they must not fold."""

import pytest
import torch

from tests.propose.builtin import kernel_check
from kernelcraft.propose.builtin.analyze import analyze
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import DEVICE, load
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

STATS = "\nself.bn.running_mean.normal_()\nself.bn.running_var.uniform_(0.5, 1.5)"
AFFINE = "\nwith torch.no_grad():\n    self.bn.weight.normal_()\n    self.bn.bias.normal_()"


@pytest.mark.parametrize("forward, init, cases", [
    ("return torch.relu(self.bn(self.conv(x)))", "self.conv = nn.Conv2d(3, 5, 3, padding=1, bias=False)\n"
     "self.bn = nn.BatchNorm2d(5)" + STATS + AFFINE, [[(2, 3, 9, 7)], [(1, 3, 4, 11)], [(3, 3, 5, 5)]]),
    ("return self.bn(self.conv(x)) * 2.0", "self.conv = nn.Conv2d(4, 7, (3, 2), stride=2, groups=1)\n"
     "self.bn = nn.BatchNorm2d(7, affine=False, eps=1e-3)" + STATS, [[(2, 4, 9, 7)], [(1, 4, 3, 3)], [(1, 4, 8, 13)]]),
    ("return F.silu(self.bn(self.conv(x)))", "self.conv = nn.Conv2d(6, 6, 3, padding=1, groups=6)\n"  # depthwise
     "self.bn = nn.BatchNorm2d(6)" + STATS + AFFINE, [[(2, 6, 5, 8)], [(1, 6, 1, 1)], [(1, 6, 7, 3)]]),
    ("return self.bn(self.conv(x)).relu()", "self.conv = nn.Conv1d(3, 5, 3)\nself.bn = nn.BatchNorm1d(5)"
     + STATS + AFFINE, [[(2, 3, 9)], [(1, 3, 17)], [(4, 3, 3)]]),
    ("x = self.conv(x)\nreturn F.batch_norm(x, self.rm, self.rv, self.w, None, training=False, eps=self.eps)",
     "self.conv = nn.Conv2d(3, 4, 3)\nself.register_buffer('rm', torch.randn(4))\n"
     "self.register_buffer('rv', torch.rand(4) + 0.5)\nself.w = nn.Parameter(torch.randn(4))\nself.eps = 1e-4",
     [[(2, 3, 5, 5)], [(1, 3, 3, 9)], [(2, 3, 6, 4)]]),
])
def test_batchnorm_folds_into_the_conv(tmp_path, forward, init, cases):
    ops, source = check_chain(tmp_path, forward, init, cases, single=True)
    assert ops[0].kind in ("conv2d", "conv1d") and ops[0].detail["bn"]["running_mean"] in ("bn.running_mean", "rm")
    assert "# folded batchnorm" in source and "kc_batchnorm_kernel" not in source


@pytest.mark.parametrize("move", [1, 3])
def test_other_conv_moves_with_the_fold(tmp_path, move):
    check_chain(tmp_path, "return torch.relu(self.bn(self.conv(x)))", "self.conv = nn.Conv2d(3, 5, 3)\n"
                "self.bn = nn.BatchNorm2d(5)" + STATS + AFFINE, [[(2, 3, 9, 7)], [(1, 3, 3, 3)], [(1, 3, 5, 12)]],
                move=move, single=True)


@pytest.mark.parametrize("forward", [
    "y = self.conv(x)\nreturn self.bn(y) + y",  # the raw conv is read again
    "return self.bn(torch.relu(self.conv(x)))",  # an epilogue comes first
    "return self.bn(self.pool(self.conv(x)))",  # pooled first
])
def test_no_fold_where_the_conv_result_is_needed_as_it_is(tmp_path, forward):
    analysis = analyze(write(tmp_path, forward, "self.conv = nn.Conv2d(3, 4, 3)\nself.bn = nn.BatchNorm2d(4)\n"
                             "self.pool = nn.MaxPool2d(2)", "[torch.randn(2, 3, 8, 8)]"))
    assert "batchnorm" in [op.kind for op in analysis.chain] and "bn" not in analysis.chain[0].detail



@pytest.mark.parametrize("forward, init, cases", [
    ("return torch.sigmoid(self.conv(x) + self.b)", "self.conv = nn.Conv2d(3, 4, 2, stride=2)\n"
     "self.b = nn.Parameter(torch.randn(4, 1, 1))", [[(2, 3, 9, 7)], [(1, 3, 5, 5)], [(3, 11, 4)]]),  # unbatched
    ("return self.b - torch.relu(self.conv(x)) * self.s", "self.conv = nn.Conv2d(3, 5, 3, padding=1)\n"
     "self.b = nn.Parameter(torch.randn(1, 5, 1, 1))\nself.s = nn.Parameter(torch.randn(1))",
     [[(2, 3, 9, 7)], [(1, 3, 1, 1)], [(1, 3, 4, 13)]]),
    ("return self.conv(x) / self.d", "self.conv = nn.Conv2d(4, 4, 3, groups=4)\n"  # depthwise
     "self.register_buffer('d', torch.rand(4, 1, 1) + 1.0)", [[(2, 4, 9, 7)], [(1, 4, 3, 3)], [(4, 5, 12)]]),
    ("return self.conv(x) + self.w", "self.conv = nn.Conv2d(3, 2, 3)\nself.w = nn.Parameter(torch.randn(5))",
     [[(2, 3, 9, 7)], [(1, 3, 3, 7)], [(3, 6, 7)]]),  # along the output's width: the input width fixed at 7
    ("return torch.tanh(self.conv(x) + self.b)", "self.conv = nn.Conv1d(3, 4, 3, stride=2)\n"
     "self.b = nn.Parameter(torch.randn(4, 1))", [[(2, 3, 9)], [(1, 3, 3)], [(3, 17)]]),
    ("return torch.relu(self.bn(self.conv(x)) + self.b)", "self.conv = nn.Conv2d(3, 4, 3, groups=1)\n"
     "self.bn = nn.BatchNorm2d(4)\nself.b = nn.Parameter(torch.randn(4, 1, 1))" + STATS + AFFINE,
     [[(2, 3, 9, 7)], [(1, 3, 3, 3)], [(2, 3, 5, 12)]]),  # batchnorm and operand both
    ("return self.pool(self.conv(x) * self.s)", "self.conv = nn.Conv2d(3, 4, 3)\nself.pool = nn.MaxPool2d(2)\n"
     "self.s = nn.Parameter(torch.randn(4, 1, 1))", [[(2, 3, 9, 7)], [(1, 3, 4, 4)], [(3, 8, 11)]]),
])
def test_parameter_operands_fold_into_the_conv(tmp_path, forward, init, cases):
    ops, source = check_chain(tmp_path, forward, init, cases, single=True)
    assert any(s[0].startswith("t") and s[0] != "tanh" for s in ops[0].detail["steps"])
    assert "kc_bcast_kernel" not in source and "kc_operand_args" in source


def test_an_operand_that_would_grow_the_output_is_refused_at_run_time(tmp_path):
    problem = write(tmp_path, "return self.conv(x) + self.b", "self.conv = nn.Conv2d(3, 4, 3)\n"
                    "self.b = nn.Parameter(torch.randn(1, 4, 1, 1))", "[torch.randn(2, 3, 5, 5)]")
    op = analyze(problem).single
    module = load(kernel_check.render(op, problem.source, {}), tmp_path)
    model = module.ModelNew().to(DEVICE)
    assert model(torch.randn(2, 3, 5, 5, device=DEVICE)).shape == (2, 4, 3, 3)
    with pytest.raises(ValueError, match="broadcasts beyond the output"):
        model(torch.randn(3, 5, 5, device=DEVICE))  # unbatched: torch's output would be (1, 4, 3, 3)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["level2/conv2d_add_sigmoid", "level1/conv2d_resnet_3x3"])
def test_every_conv_move_at_the_problems_full_size(tmp_path, name):
    """Long K loops (576 steps of 16 here) show compiler faults that short test shapes cannot: a 64x128 tile on 4
    stages came out 8e-2 off on the H100 (Triton 3.6) for both problems, right on 3."""
    from kernelcraft.problems import load_problem

    problem = load_problem(name)
    op = analyze(problem).single
    module = problem.load()
    torch.manual_seed(0)
    inputs = [t.cuda() for t in module.get_inputs()]
    ref_model = module.Model(*module.get_init_inputs()).cuda().eval()
    with torch.no_grad():
        want = ref_model.double()(*[t.double() for t in inputs]).float()
        ref_model.float()
    for move in kernel_check.moves(op):
        if move.params.precision == "tf32":
            continue  # a relaxed move, checked at its own tolerance elsewhere
        model = load(kernel_check.render(op, problem.source, move.params), tmp_path).ModelNew(
            *module.get_init_inputs()).cuda().eval()
        model.load_state_dict(ref_model.state_dict())
        with torch.no_grad():
            got = model(*inputs)
        err = ((got - want).abs().max() / want.abs().max()).item()
        assert err < 1e-5, (move.params, err)
