"""`kernelcraft mcp` driven as a coding agent drives it: the SDK's own client talking to `python -m kernelcraft
mcp` over stdio (a temporary store and cache, device cpu, small sizes). The agent's loop (list, show,
evaluate a wrong kernel, read the feedback, evaluate the fixed one, run a search, follow it, take its best
kernel); bad input answered as tool errors or verdicts while the server keeps serving; nothing but the
protocol on the server's stdout."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import anyio
import pytest

pytest.importorskip("mcp.server.mcpserver", reason="the MCP SDK (kernelcraft[mcp]) is not installed")

from mcp import Client, StdioServerParameters  # noqa: E402

from tests.helpers import FIXTURES, REPO  # noqa: E402

RELU = (FIXTURES / "relu_triton.py").read_text()
RELU_WRONG = (FIXTURES / "relu_wrong_math.py").read_text()
# Quick CPU settings for evaluate (what tests/test_api.py's quick() is to the Python API).
QUICK = {"sizes": "batch_size=5", "trials": 2, "compile_baseline": False, "timing_budget": 0.3}
# An honest kernel whose forward never returns, and one that writes to stdout from the worker.
HANGS = RELU.replace("import torch\n", "import time\nimport torch\n", 1).replace(
    "        x = x.contiguous()", "        time.sleep(3600)\n        x = x.contiguous()")
PRINTS = RELU.replace("class ModelNew", "print('candidate module says hello on stdout')\n\n\nclass ModelNew").replace(
    "        x = x.contiguous()", "        print('forward writes to stdout', flush=True)\n        x = x.contiguous()")
assert HANGS != RELU and PRINTS != RELU


def server_params(tmp_path, *command) -> StdioServerParameters:
    env = {"PYTHONPATH": str(REPO / "src"), "HOME": str(tmp_path / "home"),
           "KERNELCRAFT_HOME": str(tmp_path / "kc" / "runs.db")}
    args = list(command or ("-m", "kernelcraft", "mcp")) + ["--device", "cpu", "--cache-dir", str(tmp_path / "cache")]
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(tmp_path))


class Agent:
    """A client session plus what the transport delivered that was not a message (stray stdout lines)."""

    def __init__(self, params):
        self.stray: list[Exception] = []

        async def on_message(message):
            if isinstance(message, Exception):
                self.stray.append(message)

        self.client = Client(params, message_handler=on_message)

    async def __aenter__(self):
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc):
        return await self.client.__aexit__(*exc)

    async def call(self, name: str, progress=None, **arguments):
        result = await self.client.call_tool(name, arguments, progress_callback=progress)
        data = result.structured_content
        if data is None:  # some transports keep only the text: the first block is the same JSON
            data = json.loads(result.content[0].text) if not result.is_error else None
        return result, data

    async def ok(self, name: str, **arguments) -> dict:
        result, data = await self.call(name, **arguments)
        assert not result.is_error, result.content[0].text
        return data

    async def error(self, name: str, **arguments) -> str:
        result, _ = await self.call(name, **arguments)
        assert result.is_error, f"{name} should have failed: {result.content[0].text[:500]}"
        text = result.content[0].text
        assert text and "\n" not in text, text
        return text


@pytest.mark.slow
def test_the_agent_loop(tmp_path):
    """list → show → evaluate a wrong kernel (its feedback) → the fixed one (ok, a speedup) → a small run of the
    built-in engineer → its status (polled, then waited on with progress notifications) → its best kernel and
    report."""

    async def scenario():
        async with Agent(server_params(tmp_path)) as agent:
            names = {t.name for t in (await agent.client.list_tools()).tools}
            assert names == {"list_problems", "show_problem", "evaluate", "start_run", "run_status", "best_kernel",
                             "run_report", "start_apply", "apply_status"}
            listed = await agent.ok("list_problems", level=1)
            assert "level1/relu" in [p["name"] for p in listed["problems"]]
            shown = await agent.ok("show_problem", problem="level1/relu", small=True)
            assert "class Model" in shown["source"] and shown["sizes_text"] and shown["flops"] is not None

            wrong = await agent.ok("evaluate", problem="level1/relu", candidate=RELU_WRONG, **QUICK)
            assert wrong["status"] == "incorrect" and not wrong["correct"]
            assert wrong["feedback"].startswith("Status: incorrect") and "relative error" in wrong["feedback"]
            result, _ = await agent.call("evaluate", problem="level1/relu", candidate=RELU_WRONG, **QUICK)
            assert result.content[-1].text.startswith("Status: incorrect")  # the feedback, as prose, for the model

            fixed = await agent.ok("evaluate", problem="level1/relu", candidate=RELU, **QUICK)
            assert fixed["status"] == "ok" and fixed["correct"] and fixed["backend"] == "triton"
            assert fixed["speedup_eager"] > 0 and fixed["runtime_ms"] > 0 and "Runtime:" in fixed["feedback"]

            started = await agent.ok("start_run", problem="level1/relu", rounds=1, sizes="batch_size=5",
                                     compile_baseline=False, timing_budget=0.3)
            run_id = started["run_id"]
            status = await agent.ok("run_status", run_id=run_id)
            assert status["run_id"] == run_id and status["status"] in ("running", "done")
            assert status["proposer"] == "builtin" and status["strategy"] == "tree"

            heard = []

            async def progress(value, total, message):
                heard.append((value, total, message))

            _, waited = await agent.call("run_status", progress=progress, run_id=run_id[:17], wait=True,
                                         timeout_s=240)
            assert waited["status"] == "done" and not waited["timed_out"], waited
            assert waited["candidates_evaluated"] >= 1 and waited["best"]["final"]
            assert heard and heard[-1][0] == waited["candidates_evaluated"] and "evaluated" in heard[-1][2]
            assert [h[0] for h in heard] == sorted({h[0] for h in heard})  # progress only ever increases

            best = await agent.ok("best_kernel", run_id=run_id)
            assert "class ModelNew" in best["source"] and best["final"] and best["runtime_ms"] > 0
            assert best["feedback"].startswith("Status: ok") and best["speedup_eager"] is not None

            report = await agent.ok("run_report", run_id=run_id)
            assert report["kind"] == "run" and report["run"]["run_id"] == run_id
            assert report["candidates"] and all("source" not in c for c in report["candidates"])
            assert report["candidates"][0]["verdict"]
            full = await agent.ok("run_report", run_id=run_id, full=True)
            assert "source" in full["candidates"][0]
        return agent.stray

    assert anyio.run(scenario) == []  # nothing but protocol messages came over the server's stdout


@pytest.mark.slow
def test_a_whole_model_through_start_apply(tmp_path):
    """start_apply returns at once; apply_status follows it to its end: each region's kernel in the model, the
    model verified end to end, the file written where the agent asked."""

    async def scenario():
        async with Agent(server_params(tmp_path)) as agent:
            started = await agent.ok("start_apply", problem="level3/mlp", rounds=1, max_candidates=1,
                                     replace="correct", compile_baseline=False, timing_budget=0.3, min_share=0.0,
                                     out_dir=str(tmp_path / "applied"))
            deadline = time.monotonic() + 300
            while True:
                status = await agent.ok("apply_status", apply_id=started["apply_id"])
                if status["status"] != "running" or time.monotonic() > deadline:
                    break
                await anyio.sleep(1)
            assert status["status"] == "done", status
            assert [r["status"] for r in status["regions"]] == ["replaced"] * 3
            assert status["end_to_end"]["correct"] and "result" not in status["regions"][0]
            assert status["model_file"] == str(tmp_path / "applied" / "model_new.py")
            assert "no apply" in await agent.error("apply_status", apply_id="apply-nope")
        return agent.stray

    assert anyio.run(scenario) == []


@pytest.mark.slow
def test_bad_input_is_a_tool_error_and_the_server_keeps_serving(tmp_path):
    async def scenario():
        async with Agent(server_params(tmp_path, "-m", "kernelcraft.mcp")) as agent:
            unknown = await agent.error("evaluate", problem="level1/rellu", candidate=RELU, **QUICK)
            assert "level1/rellu" in unknown and "level1/relu" in unknown and "list_problems" in unknown
            not_python = await agent.error("evaluate", problem="level1/relu",
                                           candidate="class ModelNew:\n    def forward(self, x) return x\n")
            assert "not usable" in not_python and "syntax error" in not_python
            cuda = await agent.error("evaluate", problem="level1/relu",
                                     candidate='extern "C" __global__ void relu(float* x) {\n  x[0] = 0;\n}\n')
            assert "not a Python file defining class ModelNew" in cuda
            path = await agent.error("evaluate", problem="level1/relu", candidate=str(FIXTURES / "relu_triton.py"))
            assert "source text, not a path" in path
            assert "no problems at level 9" in await agent.error("list_problems", level=9)
            assert "no run store" in await agent.error("run_status", run_id="20990101")
            assert "unknown strategy" in await agent.error("start_run", problem="level1/relu", strategy="beam")
            assert "no run '20990101'" in await agent.error("best_kernel", run_id="20990101")  # the store exists now

            hung = await agent.ok("evaluate", problem="level1/relu", candidate=HANGS, timeout_s=3, **QUICK)
            assert hung["status"] == "timeout" and "no answer within 3 s" in hung["message"]
            assert hung["feedback"].startswith("Status: timeout")

            loud = await agent.ok("evaluate", problem="level1/relu", candidate=PRINTS, **QUICK)
            assert loud["status"] == "ok"  # and what it printed went to stderr, not onto the wire
            assert (await agent.ok("list_problems"))["count"] > 10
        return agent.stray

    assert anyio.run(scenario) == []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_streamable_http(tmp_path):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "KERNELCRAFT_HOME": str(tmp_path / "runs.db")}
    proc = subprocess.Popen([sys.executable, "-m", "kernelcraft", "mcp", "--device", "cpu", "--http",
                             f"127.0.0.1:{port}"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
                assert time.monotonic() < deadline, "the HTTP server did not start"
                time.sleep(0.2)

        async def scenario():
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                result = await client.call_tool("list_problems", {"level": 1})
                assert not result.is_error and result.structured_content["count"] >= 1

        anyio.run(scenario)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
