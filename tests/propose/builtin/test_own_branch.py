"""x (op) g(x) where g is a scalar chain of the same base as the chain that goes on, but not a prefix of it: the
operand is the chain's own value after the k steps they share with g's remaining scalar steps applied beside it
(plan.Own ("step", k, branch)), computed in registers: one kernel, no op for g, no second pass over memory. The ref
as a value (equality, JSON, copies, shifting), how values.own_value finds it, its rendering (x_branch<i> from
x_step<k>, x untouched), and references read into one op and run against torch at odd shapes (the interpreter);
a g that reads another tensor is no branch."""

import copy
import json
import math
import pickle

import pytest

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import TENSOR_STEPS, Op, Own, can_cut, is_own, merge_elementwise, operand_refs, own_steps, shift
from kernelcraft.propose.builtin.scalars import Scalars, attach
from kernelcraft.propose.builtin.steps import epilogue_lines, step_lines
from kernelcraft.propose.builtin.values import Ew, own_value
from tests.helpers import KERNELBENCH
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import check_first_answer
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

HALF = Own(0, (("mul", 0.5),))


def test_an_own_value_is_the_tuple_it_spells():
    """The prefix form stays the literal ("step", k); a branch adds its steps as tuples. Both hash, read back
    from JSON's lists as the same steps, and survive copies and pickles as Own."""
    assert Own(2) == ("step", 2) and hash(Own(2)) == hash(("step", 2)) and Own.of(("step", 2)).branch == ()
    assert HALF == ("step", 0, (("mul", 0.5),)) and Own(0, [["mul", 0.5]]) == HALF
    assert json.loads(json.dumps(["tmul", HALF])) == ["tmul", ["step", 0, [["mul", 0.5]]]]
    for clone in (copy.deepcopy(HALF), pickle.loads(pickle.dumps(HALF)), copy.copy(HALF)):
        assert type(clone) is Own and clone == HALF and clone.k == 0 and clone.branch == (("mul", 0.5),)
    assert is_own(HALF) and is_own(("step", 1)) and not is_own(("attr", "step", ())) and not is_own(0)


def test_passes_over_steps_treat_a_branch_as_its_own_value_at_k():
    steps = [["relu"], ["sigmoid"], ["tmul", Own(1, (("mul", 2.0), ("tanh",)))], ["tadd", ("attr", "b")]]
    assert operand_refs(steps) == [("attr", "b")] and own_steps(steps) == {1}
    assert can_cut(steps, 1) and not can_cut(steps, 2)
    assert shift(steps[1:], -1)[1] == ["tmul", ("step", 0, (("mul", 2.0), ("tanh",)))]
    ops = merge_elementwise([Op("elementwise", {"steps": [["exp"]]}), Op("elementwise", {"steps": [
        ["tanh"], ["tsub", HALF]]}, 0)])
    assert [op.detail["steps"] for op in ops] == [[["exp"], ["tanh"], ["tsub", Own(1, (("mul", 0.5),))]]]


@pytest.mark.parametrize("chain, other, want", [
    ((("relu",),), (), ("step", 0)),  # x * f(x): the prefix form, as before
    ((("relu",), ("tanh",)), (("relu",),), ("step", 1)),
    ((("sigmoid",),), (("mul", 0.5),), ("step", 0, (("mul", 0.5),))),  # k = 0: the base with the branch
    ((("relu",), ("tanh",)), (("relu",), ("mul", 2.0), ("exp",)), ("step", 1, (("mul", 2.0), ("exp",)))),  # k = 1
    ((("relu",),), (("relu",), ("neg",)), ("step", 1, (("neg",),))),  # chain's whole value, then the branch
    ((("sigmoid",),), (("tadd", ("attr", "b")), ("tanh",)), None),  # a branch reading another tensor
    ((("sigmoid",),), (("mul", 2.0), ("tmul", ("step", 0))), None),  # or reading its own earlier value
])
def test_own_value_finds_the_shared_steps_and_a_scalar_rest(chain, other, want):
    assert own_value(Ew("x", chain), Ew("x", other)) == want
    assert own_value(Ew("x", chain), Ew(("input", 1), other)) is None  # another base


def test_a_branch_is_computed_beside_x_by_the_step_renderers():
    lines = step_lines([["relu"], ["tanh"], ["tsub", Own(1, (("mul", 2.0), ("pow", 3.0)))], ["neg"]])
    assert lines[:2] == ["x = tl.where(x < 0.0, 0.0, x)", "x_step1 = x"]
    assert lines[3:] == ["x_branch2 = x_step1", "x_branch2 = x_branch2 * 2.0",
                         "x_branch2 = x_branch2 * x_branch2 * x_branch2", "x = x - x_branch2", "x = -x"]
    assert epilogue_lines([["tadd", ("attr", "b")], ["trdiv", HALF]], lambda k: f"load({k})") == [
        "o0 = load(0)", "x_step0 = x", "x = x + o0", "x_branch1 = x_step0", "x_branch1 = x_branch1 * 0.5",
        "x = x_branch1 / x"]


def test_a_branch_reads_numbers_from_the_module_at_run_time():
    steps = attach([["sigmoid"], ["tmul", Own(0, (("mul", 0.125), ("add", 1.0)))]], {0.125: "scale"}.get)
    assert steps[1] == ["tmul", ("step", 0, (("mul", "self.scale"), ("add", 1.0)))]
    assert Scalars.of(Op("elementwise", {"steps": steps})).params == "kc_s_scale, "


ODD = [[(3, 37)], [(1, 1)], [(2, 5, 129)], [(1031,)]]
GELU = "return 0.5 * x * (1.0 + torch.tanh((2.0 / math.pi) ** 0.5 * (x + 0.044715 * torch.pow(x, 3.0))))"


def one_op(tmp_path, forward, init="", cases=ODD, **kw):
    """The reference read as one op (its steps reading a branch: asserted), checked against torch on `cases`."""
    ops, source = check_chain(tmp_path, forward, init, cases, single=True, **kw)
    owns = [Own.of(s[1]) for s in ops[0].detail.get("steps") or [] if s[0] in TENSOR_STEPS and is_own(s[1])]
    assert any(o.branch for o in owns), ops
    assert source.count("x_branch") >= 2
    return ops[0], source


def test_mingpt_new_gelu_is_one_kernel(tmp_path):
    """KernelBench level 1's 88: the tanh chain goes on and 0.5 * x is its branch at k = 0: one pass, not four."""
    op, source = one_op(tmp_path, GELU.replace("math.pi", repr(math.pi)), rtol=1e-5, atol=1e-5)
    assert op.kind == "elementwise" and op.detail["steps"][-1] == ["tmul", HALF]
    assert source.count("@triton.jit") == 1


@pytest.mark.parametrize("forward, last", [
    ("return x * torch.sigmoid(2.0 * x) - x * 0.5", ["tsub", HALF]),  # the branch on the right of a sub
    ("return x * 0.5 - x * torch.sigmoid(2.0 * x)", ["trsub", HALF]),  # on the left: the chain goes on, r-sub
    ("return torch.tanh(x) / (x * 0.5 + 1.0)", ["tdiv", Own(0, (("mul", 0.5), ("add", 1.0)))]),
    ("return (x * 0.5 + 1.0) / torch.tanh(x)", ["tdiv", Own(0, (("tanh",),))]),  # either side: the left first
    ("return x * 0.5 / (x * torch.tanh(x))", ["trdiv", HALF]),  # only the left one is a branch: r-div
    ("return torch.maximum(torch.sigmoid(x), x * 0.25)", ["tmax", Own(0, (("mul", 0.25),))]),
    ("return torch.sigmoid(x) * F.mish(x * 2.0)", ["tmul", Own(0, (("mul", 2.0), ("mish",)))]),  # temporaries
    ("y = torch.relu(x)\nreturn y * 2.0 * torch.sigmoid(y)", ["tmul", Own(1, (("sigmoid",),))]),  # k = 1
    ("y = torch.relu(x) + 1.0\nreturn torch.exp(-y) - torch.tanh(y) * 3.0",
     ["tsub", Own(2, (("tanh",), ("mul", 3.0)))]),  # k = 2
])
def test_a_scalar_branch_of_either_operand_fuses_in_order(tmp_path, forward, last):
    op, _ = one_op(tmp_path, forward)
    assert op.detail["steps"][-1] == last


def test_a_branch_reads_a_number_forward_reads_from_the_module(tmp_path):
    op, source = one_op(tmp_path, "return x * torch.sigmoid(x) - x * self.alpha", "self.alpha = 0.37")
    assert op.detail["steps"][-1] == ["tsub", Own(0, (("mul", "self.alpha"),))]
    kernels = source.split("# ---- Triton kernels")[1]
    assert "kc_s_alpha" in kernels and "0.37" not in kernels  # read from the module, not baked in


def test_a_branch_in_a_producers_epilogue(tmp_path):
    """y = fc(x); 0.5 * y * tanh(y): both in the linear's epilogue, tanh(y) a branch of its raw result."""
    op, _ = one_op(tmp_path, "y = self.fc(x)\nreturn 0.5 * y * torch.tanh(y)", "self.fc = nn.Linear(9, 7)",
                   [[(5, 9)], [(9,)], [(2, 3, 9)]])
    assert op.kind == "linear" and op.detail["steps"] == [["mul", 0.5], ["tmul", Own(0, (("tanh",),))]]


def test_a_side_reading_another_tensor_is_no_branch(tmp_path):
    """sigmoid(x * w) * tanh(x + b): neither side is a scalar chain of x, so the second is an op of its own."""
    init = "self.w = nn.Parameter(torch.randn(7))\nself.b = nn.Parameter(torch.randn(7))"
    ops, _ = check_chain(tmp_path, "return torch.sigmoid(x * self.w) * torch.tanh(x + self.b)", init,
                         [[(3, 7)], [(1, 7)], [(2, 5, 7)]])
    assert len(ops) == 2 and not any(is_own(s[1]) for op in ops for s in op.detail["steps"] if s[0] == "tmul")


@pytest.mark.skipif(not (KERNELBENCH / "level1").exists(), reason=f"no KernelBench copy at {KERNELBENCH}")
def test_upstream_mingpt_new_gelu_is_one_op(tmp_path):
    problem = load_problem(KERNELBENCH / "level1" / "88_MinGPTNewGelu.py")
    analysis = analyze(problem)
    assert analysis.single is not None and analysis.single.detail["steps"][-1] == ["tmul", HALF], analysis
    check_first_answer(problem, tmp_path)
