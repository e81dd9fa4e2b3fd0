"""The built-in engineer as a proposer: ideas it offers, kernels it writes, what it says it cannot do."""

from __future__ import annotations

import json

import pytest

from kernelcraft.problems import load_problem
from kernelcraft.propose.base import Idea, Kernel, Request, TriedIdea, Turn
from kernelcraft.propose.builtin.proposer import BuiltinProposer, CoverageError
from tests.propose.builtin.kernel_check import moves, needs_relaxed
from kernelcraft.propose.parse import parse_ideas, parse_kernel
from tests.helpers import FIXTURES


@pytest.fixture
def engineer():
    return BuiltinProposer("cpu")


@pytest.fixture
def softmax():
    return load_problem("level1/softmax")


def offered(engineer, problem, **kw) -> list[Idea]:
    answer = engineer.ask(Request("ideas", problem, "triton", **kw))
    assert answer.error is None and answer.usage.input_tokens == 0 and answer.usage.cost == 0.0
    ideas, error = parse_ideas(answer.text, kw.get("count", 1))
    return [] if error == "exhausted" else ideas


def test_ideas_are_the_moves_not_yet_tried_then_none(engineer, softmax):
    op = engineer.coverage(softmax, "triton").single
    all_moves = moves(op)
    assert len(all_moves) >= 3
    first = offered(engineer, softmax, count=2)
    assert [i.text for i in first] == [m.text for m in all_moves[:2]]
    assert all(i.category == m.category for i, m in zip(first, all_moves))
    later = offered(engineer, softmax, count=2, tried=[TriedIdea(i.text, i.category, "1.1x") for i in first])
    assert [i.text for i in later] == [m.text for m in all_moves[2:4]]
    answer = engineer.ask(Request("ideas", softmax, "triton", count=4, tried=[TriedIdea(m.text, m.category, "incorrect") for m in all_moves]))
    assert parse_ideas(answer.text, 4) == ([], "exhausted")


def test_implementing_an_idea_renders_its_move(engineer, softmax):
    move = moves(engineer.coverage(softmax, "triton").single)[1]
    answer = engineer.ask(Request("implement", softmax, "triton", idea=Idea(move.text, move.category)))
    parsed = parse_kernel(answer.text)
    assert parsed.error is None and parsed.idea == Idea(move.text, move.category)
    assert "class ModelNew(Model)" in parsed.source and "@triton.jit" in parsed.source


def test_an_offered_idea_is_found_again_by_what_it_is_not_by_its_words(engineer, softmax):
    """The ideas it offers name their move (family and parameters); implementing one finds that move even after
    its words changed (a later version's rewording of a stored run's idea), so replaying a run does not hang on
    prose."""
    second = offered(engineer, softmax, count=2)[1]
    move = moves(engineer.coverage(softmax, "triton").single)[1]
    assert second.move == move.key and json.loads(second.move)["family"] == move.family.name
    reworded = Idea("the same kernel, said another way", second.category, second.move)
    answer = engineer.ask(Request("implement", softmax, "triton", idea=reworded))
    assert answer.error is None
    assert parse_kernel(answer.text).source == parse_kernel(engineer.ask(
        Request("implement", softmax, "triton", idea=Idea(move.text, move.category))).text).source


def test_refine_turns_walk_through_the_moves(engineer, softmax):
    all_moves = moves(engineer.coverage(softmax, "triton").single)
    first = engineer.ask(Request("implement", softmax, "triton")).text
    second = engineer.ask(Request("fix", softmax, "triton", history=[Turn(first, "Status: ok")])).text
    assert parse_kernel(first).idea.text == all_moves[0].text
    assert parse_kernel(second).idea.text == all_moves[1].text


def test_a_parent_idea_is_not_offered_again(engineer, softmax):
    all_moves = moves(engineer.coverage(softmax, "triton").single)
    parent = Kernel("src", "triton", "Status: ok", 1.2, all_moves[0].text)
    ideas = offered(engineer, softmax, count=1, parents=[parent])
    assert [i.text for i in ideas] == [all_moves[1].text]


def test_what_it_cannot_cover_it_says_plainly(engineer):
    spectrum = load_problem(FIXTURES / "problems" / "spectrum.py")
    with pytest.raises(CoverageError, match="cannot cover spectrum: fft_rfft"):
        engineer.coverage(spectrum, "triton")
    answer = engineer.ask(Request("ideas", spectrum, "triton", count=2))
    assert answer.text is None and "cannot cover" in answer.error
    with pytest.raises(CoverageError, match="writes triton, cuda_nvrtc kernels"):
        engineer.coverage(load_problem("level1/softmax"), "cuda_inline")
    with pytest.raises(CoverageError, match="no cuda_nvrtc kernels for rmsnorm"):
        engineer.coverage(load_problem("level1/rmsnorm"), "cuda_nvrtc")
    with pytest.raises(CoverageError, match="need an NVIDIA GPU"):
        engineer.coverage(load_problem("level1/softmax"), "cuda_nvrtc")


def test_on_a_gpu_cuda_moves_come_first_where_a_cuda_family_serves_the_kind(softmax):
    gpu = BuiltinProposer("cuda")
    op = gpu.coverage(softmax, "triton").single
    backends = [m.backend for m in gpu.moves(op, "triton")]
    assert backends[0] == "cuda_nvrtc" and "triton" in backends
    assert backends.index("triton") == backends.count("cuda_nvrtc")
    assert {m.backend for m in gpu.moves(op, "cuda_nvrtc")} == {"cuda_nvrtc"}
    assert {m.backend for m in BuiltinProposer("cpu").moves(op, "triton")} == {"triton"}
    answer = gpu.ask(Request("implement", softmax, "triton", idea=Idea(gpu.moves(op, "triton")[0].text, "memory")))
    assert "load_kernels(KC_SOURCE)" in answer.text


def test_the_stored_request_says_what_was_asked(engineer, softmax):
    answer = engineer.ask(Request("implement", softmax, "triton", idea=Idea("x", "memory")))
    assert "implement for level1/softmax (triton)" in answer.messages[0]["content"]
    assert json.dumps(answer.messages)  # JSON-able for the store


def test_precision_moves_only_where_the_policy_admits_them():
    matmul = load_problem("level1/matmul")
    strict, relaxed = BuiltinProposer("cuda"), BuiltinProposer("cuda", precision_moves=True)
    op = strict.coverage(matmul, "triton").single
    assert op.kind == "matmul"
    strict_moves, relaxed_moves = strict.moves(op, "triton"), relaxed.moves(op, "triton")
    assert strict_moves and not any(needs_relaxed(m) for m in strict_moves)
    assert any(needs_relaxed(m) for m in relaxed_moves) and len(relaxed_moves) > len(strict_moves)
    offered = offered_texts(strict, matmul, count=20)
    assert offered == [m.text for m in strict_moves] and not any("tolerance policy that admits TF32" in t for t in offered)


def offered_texts(engineer, problem, count):
    return [i.text for i in offered(engineer, problem, count=count)]


def test_an_idea_it_never_offered_is_said_not_swapped_for_another(engineer, softmax):
    """Asked to implement words none of its moves has (an older version's, or a seeded run's), it says so: a kernel
    of some other move stored under that idea would mislabel the run's record."""
    answer = engineer.ask(Request("implement", softmax, "triton", idea=Idea("Unroll by eight and pray", "control")))
    assert answer.text is None and "has no move 'Unroll by eight and pray' for level1/softmax" in answer.error
    assert "its moves here: " in answer.error


def test_a_cpu_is_not_offered_moves_only_a_gpu_tells_apart():
    """3xTF32, TF32 and TMA moves run in Triton's interpreter as the exact, plain kernel does: a CPU run listed
    "3xTF32 at fp32 accuracy, fed by TMA" ideas that it could not carry out. A GPU is offered them; a CPU the rest."""
    matmul = load_problem("level1/matmul")
    gpu, cpu = BuiltinProposer("cuda", precision_moves=True), BuiltinProposer("cpu", precision_moves=True)
    op = cpu.coverage(matmul, "triton").single
    on_gpu, on_cpu = gpu.moves(op, "triton"), cpu.moves(op, "triton")
    assert any(m.gpu_only for m in on_gpu) and on_cpu and not any(m.gpu_only for m in on_cpu)
    assert not any("TMA" in m.text or "TF32" in m.text for m in on_cpu)
    assert [m.text for m in on_cpu] == [m.text for m in on_gpu if not m.gpu_only]
    assert offered_texts(cpu, matmul, count=20) == [m.text for m in on_cpu]
