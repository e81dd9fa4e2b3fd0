"""The family contract (family.py) over every family in the registry, on the ops the built-in engineer reads from
the suite and from upstream KernelBench: moves are typed parameters whose idea text is derived from them and tells
them apart, parameters survive JSON, and kernel specs check their launches."""

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from kernelcraft.problems import load_problem, suite_names
from kernelcraft.propose.base import CATEGORIES
from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.family import Names, TritonKernel
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars

FAMILIES_DIR = Path(registry.__file__).parent / "families"


def suite_ops():
    out = []
    for name in suite_names():
        analysis = analyze(load_problem(name))
        out += [(name, op) for op in analysis.ops if op.kind in registry.kinds()]
    return out


SUITE_OPS = suite_ops()


def test_every_family_is_listed_once_and_serves_its_kinds():
    names = [(f.name, f.backend) for f in registry.all_families()]
    assert len(names) == len(set(names))
    for family in registry.all_families():
        assert family.kinds and family.backend in ("triton", "cuda_nvrtc")
        assert set(family.epilogue) <= set(family.kinds) and set(family.operand_epilogue) <= set(family.epilogue)
        assert dataclasses.is_dataclass(family.params) and family.params.__dataclass_params__.frozen


# kinds the suite's problems do not use (upstream KernelBench's level 3 does)
EXTRA_OPS = [("cat", Op("cat", {"dim": 1, "parts": [0, "x"]}, 0))]


def test_the_suite_reaches_every_triton_family():
    reached = {registry.family_for(op.kind).name for _, op in SUITE_OPS + EXTRA_OPS}
    assert reached == {f.name for f in registry.families("triton")}


@pytest.mark.parametrize("backend", ["triton", "cuda_nvrtc"])
def test_moves_are_typed_their_ideas_tell_them_apart_and_survive_json(backend):
    seen = 0
    for name, op in SUITE_OPS + EXTRA_OPS:
        moves = registry.moves(op, backend)
        texts = [m.text for m in moves]
        assert len(set(texts)) == len(texts), (name, texts)
        for move in moves:
            seen += 1
            assert isinstance(move.params, move.family.params) and op.kind in move.family.kinds
            assert move.category in CATEGORIES, (name, move.text)
            data = json.loads(json.dumps(move.params.to_json()))
            assert type(move.params).from_json(data) == move.params
            assert registry.move_for(op, move.params, backend).family == move.family
    assert seen


def test_parameters_say_what_they_do_not_have():
    pointwise = registry.families("triton")[0].params
    with pytest.raises(ValueError, match="no parameters"):
        pointwise.from_json({"BLOCK": 1024, "tile": 3})


def test_a_kernel_spec_generates_its_definition_and_checks_its_launches():
    kernel = TritonKernel("kc_k", ("x_ptr", "n"), ("BLOCK",), "pid = tl.program_id(0)", Scalars.of_refs(["self.s"]))
    assert kernel.source().splitlines()[:2] == ["@triton.jit", "def kc_k(kc_s_s, x_ptr, n, BLOCK: tl.constexpr):"]
    assert kernel.launch("(g,)", ["x", "x.numel()"], {"BLOCK": 64}, num_warps=4) == \
        "kc_k[(g,)](kc_s_s, x, x.numel(), BLOCK=64, num_warps=4)"
    with pytest.raises(ValueError, match="takes 2 arguments"):
        kernel.launch("(g,)", ["x"], {"BLOCK": 64})
    with pytest.raises(ValueError, match="constexprs"):
        kernel.launch("(g,)", ["x", "n"], {})
    assert Names("_op3")("kc_k") == "kc_k_op3" and Names()("kc_k") == "kc_k"


def _replace_calls(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    return [f"{path.name}:{n.lineno}" for n in ast.walk(tree) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr == "replace"]


def test_no_family_rewrites_generated_text():
    """Generated code comes from templates and specs: no family patches code it generated with str.replace."""
    found = [hit for path in sorted(FAMILIES_DIR.rglob("*.py")) for hit in _replace_calls(path)]
    assert not found, found


def test_the_family_and_parameters_a_kernel_was_written_with_are_read_back_from_its_file():
    from kernelcraft.apply.outcome import RegionOutcome
    from kernelcraft.propose.builtin.family import written_by

    problem = load_problem("level1/softmax")
    op = analyze(problem).ops[0]
    move = registry.moves(op)[1]
    source = registry.render(op, problem.source, move.params)
    assert written_by(source) == {"family": move.family.name, **move.params.to_json()}
    assert written_by(problem.source) is None  # a file the engineer did not write
    region = RegionOutcome("03_softmax", "softmax", 0.2, 0.1, "replaced", source=source)
    assert region.to_dict()["move"]["family"] == move.family.name
