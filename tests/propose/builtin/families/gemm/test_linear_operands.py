"""Parameter operands in a linear's epilogue beyond 1-D ones: one value or one per column, of shape (), (1,), (N,),
(1, 1) or (1, N) (torch.min(x, self.c) with a 0-dim nn.Parameter, x - self.bias of a (1, N) bias): folded into the
linear by analyze() and read along the output's columns, against the reference on odd shapes; refused at run time
where torch's broadcast would grow the output; and what does not fold (a parameter varying along the rows)."""

import pytest
import torch

from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin import kernel_check
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import DEVICE, load, moves, move_tolerance as tolerance
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

LINEAR = "self.fc = nn.Linear(13, 9)\n"
FORWARD = "return torch.min(self.fc(x), self.a) - self.b"
STEPS = [["tmin", ("attr", "a")], ["tsub", ("attr", "b")]]
STRICT = [i for i, m in enumerate(moves(Op("linear", {"weight": "fc.weight", "bias": None, "steps": []})))
          if not m.relaxed]


def params(a: tuple, b: tuple) -> str:
    return LINEAR + f"self.a = nn.Parameter(torch.randn({a!r}))\nself.b = nn.Parameter(torch.randn({b!r}))"


@pytest.mark.parametrize("move", [STRICT[0], STRICT[-1]])
@pytest.mark.parametrize("a, b, cases", [
    ((), (), [[(5, 13)], [(2, 3, 13)], [(13,)]]),  # 0-dim parameters, 1-D input too
    ((1,), (9,), [[(5, 13)], [(2, 3, 13)], [(13,)]]),
    ((1, 9), (1, 1), [[(5, 13)], [(2, 3, 13)], [(1, 13)]]),  # 2-D: inputs of two dims or more
    ((9,), (1, 9), [[(7, 13)], [(4, 1, 13)]]),
])
def test_parameters_along_the_columns_fold_and_match(tmp_path, a, b, cases, move):
    ops, source = check_chain(tmp_path, FORWARD, params(a, b), cases, move=move, single=True,
                              **tolerance(moves(Op("linear"))[move].params))
    assert ops[0].kind == "linear" and ops[0].detail["steps"] == STEPS
    assert "kc_column_args" in source and "kc_bcast_kernel" not in source


def test_a_two_dimensional_parameter_on_a_one_dimensional_input_is_refused_at_run_time(tmp_path):
    problem = write(tmp_path, FORWARD, params((1, 9), ()), "[torch.randn(5, 13)]")
    op = analyze(problem).single
    model = load(kernel_check.render(op, problem.source, {}), tmp_path).ModelNew().to(DEVICE)
    assert model(torch.randn(5, 13, device=DEVICE)).shape == (5, 9)
    with pytest.raises(ValueError, match="does not broadcast along 9 columns of 1 dims"):
        model(torch.randn(13, device=DEVICE))  # torch's output would be (1, 9)


@pytest.mark.parametrize("shape", [(9, 1), (2, 9), (1, 1, 9)])
def test_parameters_that_vary_along_the_rows_or_grow_the_output_stay_an_elementwise_op(tmp_path, shape):
    init = LINEAR + f"self.a = nn.Parameter(torch.randn({shape!r}))"
    analysis = analyze(write(tmp_path, "return self.fc(x) * self.a", init, "[torch.randn(2, 13)]"))
    assert [(op.kind, op.detail["steps"]) for op in analysis.chain] == [
        ("linear", []), ("elementwise", [["tmul", ("attr", "a")]])]
