"""The reduce family's prologue: a pointwise chain before a reduction (tensor operands too) folded into the reducing
kernel, so the elementwise result is never written (families/rows/prologue.py). MSE-like (an operand of x's shape),
Hinge-like (an operand broadcast along the leading dims, or along the trailing ones), over all dims, the last or a
leading or middle one, every move and odd shapes, compared with the reference in Triton's interpreter; where the
fold is refused (an operand that grows x, an op's result, a layout the kernel does not read in place); how
kc_fold_layout reads each layout; KernelBench's 94 and 100 as one kernel and its fixed-order second pass."""

import re

import pytest
import torch

from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.families.rows.prologue import kc_fold_layout
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.problems import load_problem
from tests.helpers import KERNELBENCH
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import check_first_answer, moves
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's notes on masked lanes (inf, NaN)

# a reduction with a prologue: the tiled loop's moves (the lean loop has no prologue)
N_MOVES = len(moves(Op("reduce", {"op": "sum", "dim": None, "dim_attr": None, "keepdim": False, "pre": [["square"]]})))
HINGE = "torch.clamp(1 - x * y, min=0)"
CASES = [  # (forward, input shape cases (the first is traced), the prologue's steps)
    ("return torch.mean((x - y) ** 2)", [[(37, 53), (37, 53)], [(3000,), (3000,)], [(2, 1, 5), (2, 1, 5)]],
     [["tsub", ("input", 1)], ["square"]]),  # MSE: an operand of x's shape
    (f"return torch.mean({HINGE})", [[(37, 53), (53,)], [(5, 3, 70), (3, 70)], [(1, 1), (1,)]],
     [["tmul", ("input", 1)], ["rsub", 1.0], ["clamp", 0.0, None]]),  # Hinge: broadcast along the leading dim
    (f"return torch.sum({HINGE})", [[(37, 53), (37, 1)], [(3, 4, 5), (3, 4, 1)]], None),  # along the trailing dim
    (f"return torch.sum({HINGE}, dim=-1)", [[(37, 53), (53,)], [(2, 3, 300), (300,)]], None),
    (f"return torch.mean({HINGE}, dim=-1, keepdim=True)", [[(37, 53), (37, 1)], [(5, 1), (5, 1)]], None),
    ("return torch.sum(x * y, dim=0)", [[(37, 53), (53,)], [(300, 3), (3,)]], [["tmul", ("input", 1)]]),
    ("return torch.amax(x - y, dim=1)", [[(4, 9, 6), (9, 1)], [(3, 300, 2), (300, 1)]], None),  # a middle dim
    ("return torch.amin(x * y + x, dim=(1, 2))", [[(4, 9, 6), (9, 6)], [(2, 3, 5), (3, 5)]], None),
    ("return torch.logsumexp(x * y, dim=(0, 1))", [[(37, 53), (53,)], [(9, 600), (600,)]], None),
    ("return torch.amax(x * y, dim=(0, 1), keepdim=True)", [[(37, 53), (53,)], [(9, 600), (9, 1)]], None),
    ("return torch.norm(x - y)", [[(37, 53), (53,)], [(7, 5), (7, 5)]], None),
    ("return torch.sum(x * x)", [[(37, 53), (37, 53)], [(1,), (1,)]], [["square"]]),  # no operand (y unread)
    ("return torch.mean(torch.relu(x) * 2.0, dim=0)", [[(37, 53), (37, 53)], [(3000, 3), (1, 1)]],
     [["relu"], ["mul", 2.0]]),
]


@pytest.mark.parametrize("move", range(N_MOVES))
@pytest.mark.parametrize("forward,cases,pre", CASES, ids=[c[0].removeprefix("return ") for c in CASES])
def test_folded_into_the_reduction_on_every_move(forward, cases, pre, move, tmp_path):
    single = "y" not in forward  # a prologue without operands: one plain op
    ops, source = check_chain(tmp_path, forward, "", cases, args="x, y", move=move, rtol=1e-5, atol=1e-5,
                              single=single)
    assert [op.kind for op in ops] == ["reduce"] and ops[0].src == "x", ops
    if pre is not None:
        assert ops[0].detail["pre"] == pre
    assert "reduce_pre_kernel" in source and "kc_bcast_kernel" not in source  # no elementwise kernel, no temporary
    assert "kc_pointwise_kernel" not in source


def test_other_layouts_at_run_time_are_read_right(tmp_path):
    """Traced with a contiguous operand of x's shape, run with a transposed one (copied to x's layout), one that
    broadcasts where the traced one did not (a full reduction regrouped) and one that makes x larger."""
    x, y = torch.randn(37, 53), torch.randn(53, 37)
    check_chain(tmp_path, "return torch.mean((x - y) ** 2)", "",
                [[x, y.t()], [(37, 53), (53,)], [(37, 53), (37, 1)], [(1, 53), (37, 53)]], args="x, y")


@pytest.mark.parametrize("forward,inputs,why", [
    ("return torch.sum(x * y)", "[torch.randn(5, 1), torch.randn(1, 7)]", "y makes x larger"),
    ("return torch.sum(x * y, dim=-1)", "[torch.randn(4, 6, 5), torch.randn(6, 1)]", "y's strides over (4, 6)"),
    ("return torch.sum(x * torch.softmax(x, dim=1))", "[torch.randn(4, 8), torch.randn(4, 8)]", "an op's result"),
])
def test_refused_where_the_operand_is_not_read_in_place(forward, inputs, why, tmp_path):
    analysis = analyze(write(tmp_path, forward, inputs=inputs, args="x, y"))
    assert analysis.chain is not None, analysis
    kinds = [op.kind for op in analysis.chain]
    assert kinds[-2:] == ["elementwise", "reduce"] and not analysis.chain[-1].detail.get("pre"), (why, kinds)
    shapes = [tuple(int(n) for n in s.split(", ")) for s in re.findall(r"randn\(([\d, ]+)\)", inputs)]
    check_chain(tmp_path, forward, "", [shapes], args="x, y")


def test_a_number_forward_reads_from_the_module_in_the_prologue(tmp_path):
    ops, _ = check_chain(tmp_path, "return torch.sum((x - y) * self.scale, dim=-1)", "self.scale = 0.5",
                         [[(7, 300), (7, 300)], [(2, 9), (2, 9)]], args="x, y")
    assert ops[0].detail["pre"] == [["tsub", ("input", 1)], ["mul", "self.scale"]]


@pytest.mark.parametrize("dim", ["", ", dim=-1", ", dim=0"])
def test_a_parameter_operand(dim, tmp_path):
    ops, _ = check_chain(tmp_path, f"return torch.sum((x - self.w) ** 2{dim})",
                         "self.w = nn.Parameter(torch.randn(53))", [[(37, 53)], [(2, 3, 53)]])
    assert [op.kind for op in ops] == ["reduce"] and ops[0].detail["pre"] == [["tsub", ("attr", "w")], ["square"]]


def test_a_prologue_without_operands_is_a_single_op(tmp_path):
    ops, source = check_chain(tmp_path, "return torch.sum(torch.abs(x) ** 3, dim=1)", "", [[(5, 70, 3)], [(1, 2, 1)]],
                              single=True)
    assert ops[0].detail["pre"] == [["abs"], ["pow", 3.0]]


def _layout(x, t, lo, hi):
    view = (x.shape[:lo].numel(), x.shape[lo:hi].numel(), x.shape[hi:].numel())
    found = kc_fold_layout(x, [t], *view, lo, hi, copy=False)
    return found and (*found[:4], found[4][0][1:])


def test_how_each_layout_is_read():
    x = torch.empty(6, 5)
    assert _layout(x, torch.empty(6, 5), 0, 2) == (1, 30, 1, False, (0, 0, 0, 0))  # SAME
    assert _layout(x, torch.empty(5), 0, 2) == (1, 6, 5, True, (0, 0, 1, 2))  # regrouped; HOISTED
    assert _layout(x, torch.empty(6, 1), 0, 2) == (1, 6, 5, True, (0, 1, 0, 1))  # regrouped; ALONG R
    assert _layout(x, torch.empty(5), 1, 2) == (6, 5, 1, False, (0, 1, 0, 1))  # a row's: along R
    assert _layout(x, torch.empty(6, 1), 1, 2) == (6, 5, 1, False, (1, 0, 0, 2))  # one per row: HOISTED
    assert _layout(x, torch.empty(5, 6).t(), 0, 2) is None  # transposed: copied at run time
    assert _layout(torch.empty(4, 6, 5), torch.empty(6, 1), 2, 3) is None
    found = kc_fold_layout(x, [torch.empty(5, 6).t()], 1, 30, 1, 0, 2)
    assert found[4][0][4] == 0 and found[4][0][0].is_contiguous()


@pytest.mark.skipif(not (KERNELBENCH / "level1").exists(), reason=f"no KernelBench copy at {KERNELBENCH}")
@pytest.mark.parametrize("name", ["94_MSELoss", "100_HingeLoss"])
def test_kernelbench_losses_are_one_kernel_and_a_second_pass(name, tmp_path):
    from kernelcraft.propose.base import Request
    from kernelcraft.propose.builtin.proposer import BuiltinProposer
    from kernelcraft.propose.parse import parse_kernel

    problem = load_problem(KERNELBENCH / "level1" / f"{name}.py")
    source = parse_kernel(BuiltinProposer("cuda").ask(Request("implement", problem, "triton")).text).source
    assert re.findall(r"@triton.jit\ndef (\w+)", source) == ["kc_mean_reduce_pre_kernel_op0", "kc_mean_reduce_kernel"]
    check_first_answer(problem, tmp_path)
