"""Loading problems: suite names, paths, directories, and every way a problem file can be unusable."""

from __future__ import annotations

import re

import pytest
import torch

from kernelcraft.problems import (Problem, ProblemError, load_problem, load_problem_dir, load_suite,
                                  suite_names)
from kernelcraft.problems.cost import compute_cost
from kernelcraft.problems.problem import MAX_SOURCE_BYTES, SUITE_ROOT
from tests.helpers import FIXTURES

RELU_SOURCE = (SUITE_ROOT / "level1" / "relu.py").read_text()


# -- loading ----------------------------------------------------------------------------------------

def test_load_by_suite_name():
    p = load_problem("level1/softmax")
    assert p.name == "level1/softmax"
    assert p.level == 1
    assert p.path == SUITE_ROOT / "level1" / "softmax.py"
    assert p.source == p.path.read_text()
    module = p.load()
    assert module.Model().forward(torch.tensor([[0.0, 0.0]])).tolist() == [[0.5, 0.5]]


def test_load_by_path_gives_same_source_under_the_file_stem():
    path = SUITE_ROOT / "level2" / "swish_add.py"
    by_path = load_problem(str(path))
    assert by_path.name == "swish_add"
    assert by_path.level is None
    assert by_path.source == load_problem("level2/swish_add").source
    assert by_path.sha == load_problem("level2/swish_add").sha


def test_load_a_file_outside_the_suite(tmp_path):
    path = tmp_path / "my_relu.py"
    path.write_text(RELU_SOURCE)
    p = load_problem(path)
    assert (p.name, p.path, p.level) == ("my_relu", path, None)
    assert re.fullmatch(r"[0-9a-f]{16}", p.sha)
    path.write_text(RELU_SOURCE + "\n# changed\n")
    assert load_problem(path).sha != p.sha


def test_small_sizes_apply_only_when_asked():
    p = load_problem("level1/relu")
    small = p.load(small=True)
    assert (small.batch_size, small.dim) == (37, 1000)
    assert tuple(small.get_inputs()[0].shape) == (37, 1000)
    full = p.load()  # a fresh module: the small sizes did not leak into it
    assert (full.batch_size, full.dim) == (4096, 16384)


def test_load_problem_dir_levels(tmp_path):
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "a.py").write_text(RELU_SOURCE)
    (tmp_path / "level1" / "_helpers.py").write_text("X = 1\n")  # skipped: leading underscore
    (tmp_path / "level2").mkdir()
    (tmp_path / "level2" / "b.py").write_text(RELU_SOURCE.replace("torch.relu(x)", "torch.tanh(x)"))
    problems = load_problem_dir(tmp_path)
    assert [p.name for p in problems] == ["level1/a", "level2/b"]
    assert [p.level for p in problems] == [1, 2]
    assert problems[0].path == tmp_path / "level1" / "a.py"
    assert "torch.tanh" in problems[1].source
    assert all(isinstance(p, Problem) for p in problems)


def test_load_problem_dir_flat(tmp_path):
    (tmp_path / "z.py").write_text(RELU_SOURCE)
    (tmp_path / "a.py").write_text(RELU_SOURCE)
    assert [p.name for p in load_problem_dir(tmp_path)] == ["a", "z"]


def test_load_problem_dir_takes_kernelbench_numbers_in_order(tmp_path):
    """`bench DIR --limit 3` means problems 1, 2 and 3, not 1, 10 and 100 (the names' text order)."""
    for name in ["100_HingeLoss", "10_Matmul", "1_Square", "2_Standard", "19_ReLU", "notes"]:
        (tmp_path / f"{name}.py").write_text(RELU_SOURCE)
    assert [p.name for p in load_problem_dir(tmp_path)] == ["1_Square", "2_Standard", "10_Matmul", "19_ReLU",
                                                           "100_HingeLoss", "notes"]
    for level in ("level10", "level2"):
        (tmp_path / "suite" / level).mkdir(parents=True)
        (tmp_path / "suite" / level / "3_a.py").write_text(RELU_SOURCE)
    assert [p.name for p in load_problem_dir(tmp_path / "suite")] == ["level2/3_a", "level10/3_a"]


def test_load_problem_dir_errors(tmp_path):
    with pytest.raises(ProblemError, match="holds no problem files"):
        load_problem_dir(tmp_path)
    with pytest.raises(ProblemError, match="is not a directory"):
        load_problem_dir(tmp_path / "missing")
    (tmp_path / "bad.py").write_bytes(b"\x00\x01")
    with pytest.raises(ProblemError, match="binary"):
        load_problem_dir(tmp_path)


# -- unusable files -----------------------------------------------------------------------------------

def test_missing_file(tmp_path):
    with pytest.raises(ProblemError, match="does not exist"):
        load_problem(tmp_path / "nope.py")


def test_unknown_suite_name_suggests_close_names():
    with pytest.raises(ProblemError, match=r"no problem file or suite problem named 'level1/softmaxx'"):
        load_problem("level1/softmaxx")
    with pytest.raises(ProblemError, match=r"did you mean .*level1/softmax"):
        load_problem("level9/softmax")
    with pytest.raises(ProblemError, match=r"did you mean level1/softmax"):  # misspelt: the closest by spelling
        load_problem("level1/softmx")


def test_directory_is_not_a_problem(tmp_path):
    d = tmp_path / "dir.py"
    d.mkdir()
    with pytest.raises(ProblemError, match="is a directory"):
        load_problem(d)


def test_binary_file(tmp_path):
    path = tmp_path / "bin.py"
    path.write_bytes(b"import torch\n\x00\x00\x7fELF")
    with pytest.raises(ProblemError, match="binary file"):
        load_problem(path)


def test_non_utf8_file(tmp_path):
    path = tmp_path / "latin1.py"
    path.write_bytes("# caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ProblemError, match="not UTF-8"):
        load_problem(path)


def test_huge_file(tmp_path):
    path = tmp_path / "huge.py"
    path.write_text(RELU_SOURCE + "#" * MAX_SOURCE_BYTES)
    with pytest.raises(ProblemError, match=f"limited to {MAX_SOURCE_BYTES}"):
        load_problem(path)


def test_syntax_error_names_the_line():
    with pytest.raises(ProblemError, match=r"syntax_error\.py:5: syntax error"):
        load_problem(FIXTURES / "problems" / "syntax_error.py")


def test_file_without_model():
    p = load_problem(FIXTURES / "problems" / "no_model.py")  # valid Python: reading it is fine
    with pytest.raises(ProblemError, match="not a KernelBench problem, it has no Model$"):
        p.load()


def test_file_without_get_inputs(tmp_path):
    path = tmp_path / "no_inputs.py"
    path.write_text(RELU_SOURCE.replace("def get_inputs", "def make_inputs"))
    with pytest.raises(ProblemError, match="it has no get_inputs"):
        load_problem(path).load()


def test_problem_that_raises_on_import():
    p = load_problem(FIXTURES / "problems" / "raises_on_import.py")
    with pytest.raises(ProblemError, match="importing the problem raised RuntimeError: kc-fixture"):
        p.load()


# -- the suite ----------------------------------------------------------------------------------------

def test_suite_sizes():
    names = suite_names()
    assert names == sorted(names)
    assert all(re.fullmatch(r"level\d+/\w+", n) for n in names)
    assert len(load_suite(1)) >= 30
    assert len(load_suite(2)) >= 15
    assert len(load_suite(3)) >= 5
    assert {p.level for p in load_suite(2)} == {2}
    assert len(load_suite()) == len(names)


def _shapes(specs):
    return [(tuple(s.shape), s.dtype) for s in specs]


F32, F16 = torch.float32, torch.float16

SEEDS = {
    "level1/matmul": ([((4096, 4096), F32)] * 2, [((4096, 4096), F32)]),
    "level1/conv2d_alexnet": ([((100, 3, 224, 224), F32)], [((100, 96, 55, 55), F32)]),
    "level1/softmax": ([((4096, 65536), F32)], [((4096, 65536), F32)]),
    "level1/layernorm": ([((16, 64, 256, 256), F32)], [((16, 64, 256, 256), F32)]),
    "level2/conv2d_relu_maxpool": ([((100, 3, 224, 224), F32)], [((100, 96, 27, 27), F32)]),
    "level1/matmul_fp16": ([((4096, 4096), F16)] * 2, [((4096, 4096), F16)]),
    "level1/sdpa_causal_fp16": ([((16, 32, 2048, 128), F16)] * 3, [((16, 32, 2048, 128), F16)]),
}


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_problems_have_their_exact_sizes(name):
    assert name in suite_names()
    cost = compute_cost(load_problem(name).load())
    inputs, outputs = SEEDS[name]
    assert _shapes(cost.inputs) == inputs
    assert _shapes(cost.outputs) == outputs
