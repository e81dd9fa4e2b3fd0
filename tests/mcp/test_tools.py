"""The server's tools in-process (the SDK's client on an MCPServer object, no subprocess): what they answer
without running a candidate, and a failure on kernelcraft's side said as a tool error."""

from __future__ import annotations

import anyio
import pytest

pytest.importorskip("mcp.server.mcpserver", reason="the MCP SDK (kernelcraft[mcp]) is not installed")

from mcp import Client  # noqa: E402

from kernelcraft.mcp import tools  # noqa: E402
from kernelcraft.mcp.server import build_server  # noqa: E402
from kernelcraft.problems.problem import SUITE_ROOT  # noqa: E402

RELU_PROBLEM = (SUITE_ROOT / "level1" / "relu.py").read_text()


def call(tmp_path, *calls):
    """[(name, arguments)] → their results, on one in-process server whose store is in tmp_path."""
    server, runs = build_server(tools.Defaults(tmp_path / "runs.db", "cpu", tmp_path / "cache"))

    async def scenario():
        async with Client(server) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    try:
        return anyio.run(scenario)
    finally:
        runs.shutdown()


def test_show_problem_by_name_and_as_source_text(tmp_path):
    by_name, as_text, sized = call(tmp_path, ("show_problem", {"problem": "level1/relu"}),
                                   ("show_problem", {"problem": RELU_PROBLEM, "small": True}),
                                   ("show_problem", {"problem": "level1/relu", "sizes": "batch_size=3,dim=7"}))
    assert not by_name.is_error and by_name.structured_content["name"] == "level1/relu"
    assert by_name.structured_content["level"] == 1 and by_name.structured_content["bytes"] > 0
    assert not as_text.is_error and as_text.structured_content["source"] == RELU_PROBLEM
    assert sized.structured_content["sizes"]["constants"] == {"batch_size": 3, "dim": 7}


def test_bad_arguments_are_tool_errors(tmp_path):
    unknown, bad_size, schema, no_run = call(
        tmp_path, ("show_problem", {"problem": "level1/softmx"}),
        ("show_problem", {"problem": "level1/relu", "sizes": "batch_sise=3"}),
        ("evaluate", {"problem": "level1/relu", "candidate": "x", "trials": 0}),
        ("best_kernel", {"run_id": "nope"}))
    said = unknown.content[0].text
    assert unknown.is_error and "did you mean level1/softmax" in said and "list_problems lists" in said
    assert bad_size.is_error and "batch_sise" in bad_size.content[0].text
    assert schema.is_error and "trials" in schema.content[0].text  # the input schema's bounds
    assert no_run.is_error and "no run store at" in no_run.content[0].text


def test_a_failure_on_kernelcrafts_side_is_a_tool_error(tmp_path, monkeypatch):
    def broken(level=None):
        raise RuntimeError("disk on fire\nmore detail")

    monkeypatch.setattr(tools, "list_problems", broken)
    failed, = call(tmp_path, ("list_problems", {}))
    assert failed.is_error
    assert "kernelcraft failed on its side (RuntimeError: disk on fire); the server" in failed.content[0].text


def test_the_progress_line_says_tiny_speedups_and_counts_in_words():
    from kernelcraft.mcp.server import _progress_line

    status = {"status": "running", "round": 1, "rounds": 3, "candidates_evaluated": 1,
              "best": {"speedup_eager": 0.00055}}
    assert _progress_line(status) == "running: round 1/3, 1 candidate evaluated, best 0.00055x eager"
    status.update(candidates_evaluated=4, best=None)
    assert _progress_line(status) == "running: round 1/3, 4 candidates evaluated"


@pytest.mark.parametrize("text, said", [
    ("__global__ void k(float* x) {}", "is not a Python file defining class ModelNew: a kernel in CUDA"),
    ("kernels/relu.py", "must be source text, not a path or a name"),
    ("relu_triton", "must be source text, not a path or a name"),
])
def test_a_candidate_that_is_not_a_file_is_told_what_it_is(text, said):
    """A one-line CUDA kernel was told it was a path or a name; a path or a name still is."""
    from kernelcraft.candidate import CandidateError

    with pytest.raises(CandidateError, match=said):
        tools.check_candidate_text(text)
