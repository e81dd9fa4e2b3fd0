"""A coding agent's loop over `kernelcraft mcp`, timed: the MCP SDK's own client starts the server over stdio
and calls its tools as an agent would, on the device given, at the problems' full sizes on a GPU:

  evaluate a wrong kernel (reads the mismatch feedback) -> the fixed one (ok, its speedup) -> start a run of the
  built-in engineer -> wait on it with progress notifications -> its best kernel -> its report.

Each step's wall time (what the agent waits for), the verdicts, and the progress notifications received are
written as one JSON record, with the device, torch version and date.

    python benchmarks/mcp_agent.py --device cuda --out benchmarks/results/mcp-agent-h100.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio
import torch
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"


async def agent_loop(args, work: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
           "KERNELCRAFT_HOME": str(work / "runs.db")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "kernelcraft", "mcp", "--device", args.device,
                                                                  "--cache-dir", str(work / "cache")], env=env)
    steps, notes = [], []

    async def on_progress(progress, total, message):
        notes.append({"t": round(time.monotonic() - t0, 2), "progress": progress, "total": total, "message": message})

    async with Client(params) as client:
        async def call(name, progress=None, **arguments):
            t = time.monotonic()
            result = await client.call_tool(name, arguments, progress_callback=progress)
            data = result.structured_content or {}
            steps.append({"tool": name, "seconds": round(time.monotonic() - t, 2), "error": result.is_error,
                          **({"text": result.content[0].text[:300]} if result.is_error else {})})
            if result.is_error:
                raise SystemExit(f"{name} failed: {result.content[0].text}")
            return data

        wrong = await call("evaluate", problem=args.problem, candidate=(FIXTURES / "relu_wrong_math.py").read_text())
        fixed = await call("evaluate", problem=args.problem, candidate=(FIXTURES / "relu_triton.py").read_text())
        started = await call("start_run", problem=args.run_problem, rounds=args.rounds)
        t0 = time.monotonic()
        status = await call("run_status", progress=on_progress, run_id=started["run_id"], wait=True,
                            timeout_s=args.wait)
        while status["status"] == "running":
            status = await call("run_status", progress=on_progress, run_id=started["run_id"], wait=True,
                                timeout_s=args.wait)
        best = await call("best_kernel", run_id=started["run_id"])
        report = await call("run_report", run_id=started["run_id"])
    keep = ("status", "correct", "runtime_ms", "eager_ms", "compile_ms", "speedup_eager", "speedup_compile", "device")
    return {
        "what": "a coding agent's loop over kernelcraft mcp (stdio), the MCP SDK's client; wall time per tool call",
        "device": fixed.get("device"), "torch": torch.__version__, "date": datetime.date.today().isoformat(),
        "steps": steps,
        "wrong": {**{k: wrong.get(k) for k in keep}, "feedback_head": wrong["feedback"].splitlines()[:3]},
        "fixed": {**{k: fixed.get(k) for k in keep}, "sizes": fixed.get("sizes"),
                  "feedback_head": fixed["feedback"].splitlines()[:3]},
        "run": {"problem": args.run_problem, "run_id": started["run_id"], "status": status["status"],
                "stop_reason": status.get("stop_reason"), "candidates": status["candidates"],
                "by_status": status["by_status"], "rounds": status.get("rounds")},
        "progress_notifications": notes,
        "best": {k: best.get(k) for k in ("key", "round", "idea", "runtime_ms", "eager_ms", "compile_ms",
                                          "speedup_eager", "speedup_compile", "final")},
        "report_trajectory": report.get("trajectory"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--problem", default="level1/relu", help="what the two evaluate calls judge")
    parser.add_argument("--run-problem", default="level1/softmax", help="what the run optimizes")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--wait", type=float, default=50.0, help="seconds of each run_status wait")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        record = anyio.run(agent_loop, args, Path(work))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    for s in record["steps"]:
        print(f"{s['tool']:>12}  {s['seconds']:7.2f} s" + ("  ERROR" if s["error"] else ""))
    print(json.dumps({k: record[k] for k in ("device", "wrong", "fixed", "run", "best")}, indent=1))


if __name__ == "__main__":
    main()
