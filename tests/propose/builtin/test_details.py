"""Each op kind's detail is a typed dict its family declares (families/*/ops.py, Family.details), and every
analysis ends by checking its ops against them (details.py): a key nobody declared, a key missing, a value of the
wrong type is an analysis error naming the kind and the key, never a kernel written from a detail nobody reads."""

from typing import Literal, NotRequired, TypedDict

import pytest

from kernelcraft.problems import load_problem, suite_names
from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.details import detail_problems
from kernelcraft.propose.builtin.plan import Op


class Inner(TypedDict):
    op: Literal["triu", "tril"]
    diagonal: int


class Example(TypedDict):
    dim: int
    scale: float | None
    dims: list[int] | None
    mask: NotRequired[Inner]


def test_every_kind_a_family_serves_has_its_detail_type():
    assert registry.kinds() <= set(registry.detail_types())


@pytest.mark.parametrize("detail, said", [
    ({"dim": 1, "scale": None, "dims": None}, []),
    ({"dim": 1, "scale": 2, "dims": [0, 1], "mask": {"op": "tril", "diagonal": 0}}, []),  # an int is a float
    ({"dim": 1, "scale": None, "dims": None, "keepdim": True}, ["'keepdim': not a key of Example"]),
    ({"scale": None, "dims": None}, ["'dim': missing, Example needs it"]),
    ({"dim": True, "scale": None, "dims": None}, ["dim: True is not a int"]),  # a bool is no number
    ({"dim": 1, "scale": "2", "dims": None}, ["scale: '2' is none of float | None"]),
    ({"dim": 1, "scale": None, "dims": [0, 1.5]}, ["dims: [0, 1.5] is none of list[int] | None"]),
    ({"dim": 1, "scale": None, "dims": None, "mask": {"op": "band", "diagonal": 0}},
     ["mask.op: 'band' is not one of ['triu', 'tril']"]),
])
def test_the_check_names_the_key_and_what_is_wrong(detail, said):
    assert detail_problems(detail, Example) == said


def test_an_op_whose_detail_is_not_its_kinds_type_is_said_with_its_kind():
    op = Op("softmax", {"dim": -1, "axis": 0})
    assert registry.detail_problems(op) == ["softmax.'axis': not a key of Softmax"]
    assert registry.detail_problems(Op("warp", {})) == ["no detail type declared for the op kind 'warp'"]


def test_every_op_the_engineer_reads_from_the_suite_fits_its_type():
    for name in suite_names():
        analysis = analyze(load_problem(name))
        assert "not its kind's type" not in (analysis.error or ""), (name, analysis.error)
        for op in analysis.ops:
            assert registry.detail_problems(op) == [], (name, op)
