"""Chains of ops rendered as one candidate (chain.py): ModelNew runs each op's kernels in turn and matches Model
on odd shapes; kernels two ops share are emitted once, clashing names renamed; the chain's moves are its lead
op's; and the level-2 problems it covers match their references at their small sizes, through the proposer."""

import json

import pytest
import torch

from kernelcraft.problems import load_problem, suite_names
from kernelcraft.propose.base import Idea, Request
from kernelcraft.propose.builtin import chain
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.proposer import BuiltinProposer, CoverageError
from tests.propose.builtin.kernel_check import moves, needs_relaxed
from kernelcraft.propose.parse import parse_kernel
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import DEVICE, assert_no_torch_compute, load
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.mark.parametrize("k, h, n", [(13, 7, 5), (32, 33, 17), (8, 64, 1)])
def test_two_linears_define_their_own_kernels(tmp_path, k, h, n):
    ops, source = check_chain(tmp_path, "return self.fc2(torch.relu(self.fc1(x)))",
                              f"self.fc1 = nn.Linear({k}, {h})\nself.fc2 = nn.Linear({h}, {n})",
                              [[(5, k)], [(2, 3, k)], [(1, k)]])
    assert [(op.kind, op.src, op.detail["steps"]) for op in ops] == [("linear", "x", [["relu"]]), ("linear", 0, [])]
    assert source.count("def kc_linear_kernel_op0(") == 1 and source.count("def kc_linear_kernel_op1(") == 1
    assert "def kc_linear_kernel(" not in source


def test_repeated_layers_share_their_kernels(tmp_path):
    """Ops whose kernels differ only by their names take the first one's (a network's repeated layers compile once);
    a layer with another epilogue gets its own."""
    ops, source = check_chain(tmp_path, "return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))",
                              "self.fc1 = nn.Linear(6, 6)\nself.fc2 = nn.Linear(6, 6)\nself.fc3 = nn.Linear(6, 5)",
                              [[(5, 6)], [(1, 6)]])
    assert [op.detail["steps"] for op in ops] == [[["relu"]], [["relu"]], []]
    assert source.count("def kc_linear_kernel_op0(") == 1 and "def kc_linear_kernel_op1(" not in source
    assert source.count("def kc_linear_kernel_op2(") == 1
    helper = source.split("def kc_op1_linear(", 1)[1].split("\ndef ", 1)[0]
    assert "kc_linear_kernel_op0[" in helper


def test_identical_kernels_are_emitted_once(tmp_path):
    _, source = check_chain(tmp_path, "return torch.softmax(torch.softmax(x, -1), dim=-1)", "",
                            [[(5, 7)], [(3, 130)], [(2, 3, 17)]])
    assert source.count("def kc_softmax_kernel_op0(") == 1 and "kc_softmax_kernel_op1" not in source
    assert source.count("def kc_tiles(") == 1


def test_a_softmax_with_an_epilogue_has_kernels_of_its_own(tmp_path):
    ops, source = check_chain(tmp_path, "return torch.softmax(torch.softmax(x, -1) * 2.0, dim=-1)", "",
                              [[(5, 7)], [(3, 130)], [(2, 3, 17)]])
    assert [op.detail.get("steps") for op in ops] == [[["mul", 2.0]], None]
    assert "def kc_softmax_kernel_op0(" in source and "def kc_softmax_kernel_op1(" in source
    assert source.count("def kc_tiles(") == 1


@pytest.mark.parametrize("forward, init, cases, kinds", [
    ("return torch.softmax(self.fc(x), dim=1)", "self.fc = nn.Linear(19, 11)", [[(5, 19)], [(1, 19)], [(33, 19)]],
     ["linear", "softmax"]),
    ("return torch.relu(self.fc(x)).sum(dim=1)", "self.fc = nn.Linear(9, 21)", [[(7, 9)], [(1, 9)], [(2, 3, 9)]],
     ["linear", "reduce"]),
    ("return x + self.fc(x)", "self.fc = nn.Linear(12, 12)", [[(5, 12)], [(2, 3, 12)], [(1, 12)]],
     ["linear", "elementwise"]),
    ("return torch.relu(self.fc(x)) + self.b", "self.fc = nn.Linear(10, 7, bias=False)\n"  # 2-D: not folded
     "self.b = nn.Parameter(torch.randn(3, 7))", [[(3, 10)], [(2, 3, 10)], [(1, 10)]], ["linear", "elementwise"]),
    ("x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w\nreturn self.fc(x)",
     "self.w = nn.Parameter(torch.randn(13))\nself.fc = nn.Linear(13, 6, bias=False)",
     [[(3, 13)], [(2, 5, 13)], [(1, 13)]], ["rmsnorm", "linear"]),
    ("x = self.norm(self.fc(x))\nreturn x * torch.sigmoid(x)", "self.fc = nn.Linear(9, 12)\n"
     "self.norm = nn.GroupNorm(3, 12)", [[(5, 9)], [(1, 9)], [(3, 9)]], ["linear", "groupnorm"]),
    ("return self.fc(x.flatten(1))", "self.fc = nn.Linear(12, 5)", [[(3, 3, 4)], [(2, 2, 2, 3)], [(1, 12)]],
     ["view", "linear"]),
    ("return torch.relu(x.view(-1)) * 2.0", "", [[(3, 5)], [(7,)], [(2, 3, 4)]], ["view", "elementwise"]),
    ("y = torch.relu(self.fc(x))\nreturn torch.softmax(y, -1) + y", "self.fc = nn.Linear(6, 9)",
     [[(4, 6)], [(1, 6)], [(3, 2, 6)]], ["linear", "softmax", "elementwise"]),
    ("y = self.fc(x)\nreturn torch.relu(y) + torch.softmax(y, -1)", "self.fc = nn.Linear(6, 9)",
     [[(4, 6)], [(1, 6)], [(5, 6)]], ["linear", "softmax", "elementwise", "elementwise"]),
    ("return x.pow(2).mean(-1, keepdim=True) + 1.0", "", [[(4, 6)], [(3, 1)], [(2, 3, 37)]],
     ["reduce", "elementwise"]),  # the square is the mean's prologue
    ("t = torch.softmax(x * 2.0, -1)\nreturn torch.softmax(x * 2.0, 0)", "", [[(4, 6)], [(3, 1)], [(2, 3, 37)]],
     ["elementwise", "softmax"]),  # the first softmax's result is thrown away: not computed
])
def test_chains_match_their_reference(tmp_path, forward, init, cases, kinds):
    ops, _ = check_chain(tmp_path, forward, init, cases)
    assert [op.kind for op in ops] == kinds


@pytest.mark.parametrize("forward, cases, kinds", [
    ("return torch.softmax(a @ b * 0.5, -1)", [[(5, 7), (7, 9)], [(3, 4, 33), (3, 33, 6)], [(1, 1), (1, 1)]],
     ["matmul", "softmax"]),  # the scale: the matmul's epilogue
    ("return F.mse_loss(a, b) * 2.0", [[(5, 7), (5, 7)], [(3, 1, 9), (3, 1, 9)], [(1,), (1,)]],
     ["loss", "elementwise"]),
    ("return torch.relu(b) * a", [[(5, 7), (5, 7)], [(3, 9), (9,)], [(2, 1), (2, 3)]], ["elementwise"]),
])
def test_chains_over_two_inputs(tmp_path, forward, cases, kinds):
    ops, _ = check_chain(tmp_path, forward, "", cases, args="a, b")
    assert [op.kind for op in ops] == kinds


@pytest.mark.parametrize("forward, init", [
    ("y = self.conv(x)\nreturn self.bn(y).relu() - y", "self.conv = nn.Conv2d(3, 5, 3, padding=1, bias=False)\n"
     "self.bn = nn.BatchNorm2d(5)\nself.bn.running_mean.normal_()\nself.bn.running_var.uniform_(0.5, 1.5)"),
    ("return F.adaptive_avg_pool2d(F.gelu(self.conv(x)), 1).flatten(1)", "self.conv = nn.Conv2d(3, 4, 3)"),
    ("return torch.sigmoid(self.conv(x) + x.mean())", "self.conv = nn.Conv2d(3, 4, 2, stride=2)"),
])
def test_conv_chains(tmp_path, forward, init):
    check_chain(tmp_path, forward, init, [[(2, 3, 9, 7)], [(1, 3, 5, 5)], [(1, 3, 4, 11)]])


@pytest.mark.parametrize("move", range(len(chain.moves([Op("linear", {"weight": "w", "bias": None, "steps": []})]))))
def test_every_move_of_a_chain(tmp_path, move):
    ops = [Op("linear", {"weight": "w", "bias": None, "steps": []})]
    tol = 2e-2 if DEVICE == "cuda" and needs_relaxed(chain.moves(ops)[move]) else 1e-4  # TF32 on a GPU
    check_chain(tmp_path, "return torch.softmax(torch.relu(self.fc(x)) * 0.5, dim=-1)", "self.fc = nn.Linear(21, 19)",
                [[(5, 21)], [(1, 21)], [(2, 3, 21)]], move=move, rtol=tol, atol=tol)


def test_the_lead_op_carries_the_moves():
    ops = [Op("linear", {"weight": "fc.weight", "bias": None, "steps": []}), Op("softmax", {"dim": -1}, 0)]
    assert chain.lead(ops) == 0
    lead_moves = moves(ops[0])
    chain_moves = chain.moves(ops)
    assert [m.params for m in chain_moves] == [m.params for m in lead_moves]
    assert all(m.lead == 0 for m in chain_moves)
    assert [m.category for m in chain_moves] == [m.category for m in lead_moves]
    assert len({m.text for m in chain_moves}) == len(chain_moves)
    assert all("linear -> softmax" in m.text and "softmax on their first moves" in m.text for m in chain_moves)
    assert [needs_relaxed(m) for m in chain_moves] == [needs_relaxed(m) for m in lead_moves]
    pool_first = [Op("pool2d", {"pool": "max"}), Op("elementwise", {"steps": [["relu"]]}, 0)]
    assert chain.lead(pool_first) == 0 and chain.lead([Op("elementwise", {"steps": [["tadd", "x"]]})]) == 0
    assert chain.lead([Op("view", {"shape": [-1]}), Op("softmax", {"dim": 0}, 0), Op("matmul", {}, 1)]) == 2


# -- the level-2 problems ------------------------------------------------------------------------------------

CHAINS = {"avgpool_sigmoid_multiply": ["pool2d", "elementwise"],
          "bmm_scale_softmax": ["matmul", "softmax"],
          "conv2d_gelu_global_avgpool": ["conv2d", "view"],
          "gemm_groupnorm_swish": ["linear", "groupnorm"],  # swish: the groupnorm's epilogue
          "gemm_relu_sum": ["linear", "reduce"],
          "gemm_softmax": ["linear", "softmax"],
          "conv3d_relu_mean": ["conv3d", "reduce"],
          "linear_residual_add": ["linear", "elementwise"],
          "rmsnorm_linear": ["rmsnorm", "linear"],
          "swish_add": ["elementwise"]}


def test_level2_coverage():
    engineer = BuiltinProposer("cpu")
    for name in (n for n in suite_names() if n.startswith("level2/")):
        short = name.split("/")[1]
        analysis = engineer.coverage(load_problem(name), "triton")
        if short in CHAINS:
            assert [op.kind for op in analysis.chain] == CHAINS[short], name
            with pytest.raises(CoverageError, match="cover single ops, not a chain"):
                engineer.coverage(load_problem(name), "cuda_nvrtc")
        else:
            assert analysis.single is not None, name


SINGLE = ["conv2d_batchnorm_relu", "conv2d_add_sigmoid", "gemm_relu_add_bias"]  # newly one op: folded epilogues


@pytest.mark.parametrize("name", sorted([*CHAINS, *SINGLE]))
def test_level2_problems_match_at_small_sizes(name, tmp_path):
    """The proposer's first implementation of each newly covered problem, at the problem's SMALL_SIZES."""
    problem = load_problem(f"level2/{name}")
    engineer = BuiltinProposer("cpu")
    answer = engineer.ask(Request("implement", problem, "triton"))
    parsed = parse_kernel(answer.text)
    assert answer.error is None and parsed.error is None
    analysis = engineer.coverage(problem, "triton")
    first = engineer.moves(analysis.single or analysis.chain, "triton")[0]
    assert parsed.idea == Idea(first.text, first.category)
    assert_no_torch_compute(parsed.source)
    module = load(parsed.source, tmp_path)
    small = problem.load(small=True)
    for key, value in (getattr(small, "SMALL_SIZES", None) or {}).items():
        setattr(module, key, value)
    torch.manual_seed(0)
    inputs = [t.to(DEVICE) for t in module.get_inputs()]
    torch.manual_seed(1)
    ref = module.Model(*module.get_init_inputs()).to(DEVICE).eval()
    torch.manual_seed(1)
    new = module.ModelNew(*module.get_init_inputs()).to(DEVICE).eval()
    with torch.no_grad():
        want, got = ref(*inputs), new(*inputs)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_a_forward_of_views_alone_is_not_covered(tmp_path):
    problem = write(tmp_path, "return x.flatten(1)", "", "[torch.randn(2, 3, 4)]")
    assert [op.kind for op in analyze(problem).chain] == ["view"]
    with pytest.raises(CoverageError, match="only views"):
        BuiltinProposer("cpu").coverage(problem, "triton")


def test_ideas_for_a_chain_are_its_moves_in_order():
    problem = load_problem("level2/gemm_softmax")
    engineer = BuiltinProposer("cuda")
    answer = engineer.ask(Request("ideas", problem, "triton", count=3))
    all_moves = engineer.moves(engineer.coverage(problem, "triton").chain, "triton")
    assert all(not needs_relaxed(m) for m in all_moves) and len(all_moves) >= 3
    offered = json.loads(answer.text.split("```json\n")[1].split("\n```")[0])
    assert [i["idea"] for i in offered] == [m.text for m in all_moves[:3]]


def test_a_mean_of_squares_as_a_tensor_operand(tmp_path):
    ops, _ = check_chain(tmp_path, "return x / (x.pow(2).mean(-1, keepdim=True) + 1e-3)", "",
                         [[(4, 6)], [(3, 1)], [(2, 3, 37)]])
    assert [(op.kind, op.src) for op in ops] == [("reduce", "x"), ("elementwise", 0)]  # the square: a prologue
    assert ops[0].detail["pre"] == [["square"]] and ops[1].detail["steps"] == [["add", 1e-3], ["trdiv", "x"]]
