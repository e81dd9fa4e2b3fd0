"""Linear layers through the GEMM family: x (..., K) @ weight.T + bias with the pointwise ops after it fused
into the epilogue (1-D parameter operands too); every move on odd sizes, 1-D and 3-D inputs, with and without
bias; and the analysis of nn.Linear / F.linear."""

import pytest

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.kernel_check import moves, parts, render
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import assert_no_torch_compute, check, reference, move_tolerance as tolerance
from tests.propose.builtin.test_analyze import single, write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

CASES = [((37, 19), (5, 37)), ((16, 33), (2, 3, 16)), ((8, 5), (8,)), ((1, 1), (1, 1))]


def linear_op(bias=True, steps=()) -> Op:
    return Op("linear", {"weight": "fc.weight", "bias": "fc.bias" if bias else None, "steps": [list(s) for s in steps]})


@pytest.mark.parametrize("params", [m.params for m in moves(linear_op())],
                         ids=lambda p: "{precision}-{BLOCK_M}x{BLOCK_N}{tma}".format(**p.to_json()))
@pytest.mark.parametrize("bias", [True, False])
def test_linear_moves(params, bias, tmp_path):
    ref = reference("self.fc(x)", "self, k, n", f"self.fc = nn.Linear(k, n, bias={bias})")
    check(linear_op(bias), ref, params, CASES, tmp_path, **tolerance(params))


def test_epilogue_steps(tmp_path):
    params = moves(linear_op())[2].params
    ref = reference("F.gelu(self.fc(x)) * 2.0", "self, k, n", "self.fc = nn.Linear(k, n)")
    check(linear_op(steps=[["gelu"], ["mul", 2.0]]), ref, params, CASES[:3], tmp_path, **tolerance(params))


def test_tma_is_a_run_time_choice_with_no_copy_of_the_weight():
    ref = reference("self.fc(x)", "self, k, n", "self.fc = nn.Linear(k, n)")
    for m in moves(linear_op()):
        src = render(linear_op(), ref, m.params)
        assert_no_torch_compute(src)
        assert ("kc_linear_tma(" in src) == m.params.tma
        assert ".t().contiguous()" not in src


def test_analysis_of_linear_spellings(tmp_path):
    op = analyze(load_problem("level1/linear")).single
    assert (op.kind, op.detail) == ("linear", {"weight": "linear.weight", "bias": "linear.bias", "steps": []})
    op = analyze(load_problem("level2/gemm_gelu_scale")).single
    assert op.kind == "linear" and op.detail["steps"][0] == ["gelu"]
    op = single(tmp_path, "return torch.relu(F.linear(x, self.w))", "self.w = nn.Parameter(torch.randn(3, 8))")
    assert (op.kind, op.detail) == ("linear", {"weight": "w", "bias": None, "steps": [["relu"]]})
    chained = analyze(write(tmp_path, "return self.fc(x * 2.0)", "self.fc = nn.Linear(8, 3)"))
    assert chained.single is None
    assert [(op.kind, op.src) for op in chained.chain] == [("elementwise", "x"), ("linear", 0)]
    two = analyze(write(tmp_path, "return self.fc(x) + x", "self.fc = nn.Linear(8, 8)"))
    assert two.single is None and two.ops[1].detail["steps"] == [["tadd", "x"]]


@pytest.mark.parametrize("params", [m.params for m in moves(linear_op())][:3] + [moves(linear_op())[-1].params],
                         ids=lambda p: "{precision}-{BLOCK_M}x{BLOCK_N}{tma}".format(**p.to_json()))
def test_one_dimensional_parameter_operands_fold_into_the_epilogue(params, tmp_path):
    move = [m.params for m in moves(linear_op())].index(params)
    ops, source = check_chain(tmp_path, "return (torch.relu(self.fc(x)) + self.b) * self.s - self.b",
                              "self.fc = nn.Linear(13, 9, bias=False)\nself.b = nn.Parameter(torch.randn(9))\n"
                              "self.s = nn.Parameter(torch.randn(1))", [[(5, 13)], [(2, 3, 13)], [(1, 13)]],
                              move=move, single=True, **tolerance(params))
    assert ops[0].detail["steps"] == [["relu"], ["tadd", ("attr", "b")], ["tmul", ("attr", "s")],
                                      ["tsub", ("attr", "b")]]
    assert "kc_column_args" in source and "kc_bcast_kernel" not in source
    assert parts(ops[0], params)[1][1].count("o1_ptr, o1_s,") == 1  # two operands, each once


def conv1d_op(bias=True) -> Op:
    """GPT-2's Conv1D: torch.addmm(bias, x, weight) with the weight held (K, N)."""
    return Op("linear", {"weight": "w", "bias": "b" if bias else None, "steps": [], "weight_kn": True})


@pytest.mark.parametrize("params", [m.params for m in moves(conv1d_op())],
                         ids=lambda p: "{precision}-{BLOCK_M}x{BLOCK_N}{tma}".format(**p.to_json()))
def test_a_weight_held_k_by_n_every_move(params, tmp_path):
    ref = reference("torch.addmm(self.b, x, self.w)", "self, k, n",
                    "self.w = nn.Parameter(torch.randn(k, n))\nself.b = nn.Parameter(torch.randn(n))")
    check(conv1d_op(), ref, params, [c for c in CASES if len(c[1]) == 2], tmp_path, **tolerance(params))


def test_analysis_of_a_weight_held_k_by_n(tmp_path):
    held = "self.w = nn.Parameter(torch.randn(8, 3))\nself.b = nn.Parameter(torch.randn(3))"
    op = single(tmp_path, "return torch.addmm(self.b, x, self.w)", held)
    assert (op.kind, op.detail) == ("linear", {"weight": "w", "bias": "b", "steps": [], "weight_kn": True})
    op = single(tmp_path, "return torch.relu(x @ self.w + self.b)", held)
    assert op.detail == {"weight": "w", "bias": None, "steps": [["tadd", ("attr", "b")], ["relu"]], "weight_kn": True}
    scaled = analyze(write(tmp_path, "return torch.addmm(self.b, x, self.w, beta=0.5)", held))
    assert scaled.single is None and "addmm" in scaled.unsupported
