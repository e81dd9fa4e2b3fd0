"""The MCP server: kernelcraft's tools for a coding agent, on the official MCP Python SDK (MCPServer).

Each tool is a thin wrapper over tools.py (itself over kernelcraft.api). A result carries the data twice:
as structured content, and as text (JSON, then for a verdict the feedback as plain prose) for clients that
read text only. Bad input is a tool error (isError) with a one-line message saying what to pass instead;
an unexpected failure is a tool error too, its traceback on the server's stderr: the server keeps serving.
"""

from __future__ import annotations

import json
import logging
import traceback
from typing import Annotated, Literal

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from kernelcraft import api
from kernelcraft.errors import KernelcraftError
from kernelcraft.mcp import tools
from kernelcraft.mcp.runs import Runs
from kernelcraft.mcp.tools import Defaults

BACKENDS = ", ".join(b["name"] for b in api.backends())  # for the tools' descriptions
ASKABLE = ", ".join(b["name"] for b in api.backends() if b["promptable"])

log = logging.getLogger("kernelcraft.mcp")

INSTRUCTIONS = """kernelcraft verifies and times custom GPU kernels (CUDA, Triton, C++) against PyTorch references, \
and searches for faster ones. A problem is KernelBench-format Python (class Model, get_inputs, \
get_init_inputs): a suite name such as level1/softmax (list_problems), a path, or source text. A candidate \
is the source text of a Python file defining class ModelNew(nn.Module) with the same init arguments. \
Typical loop: show_problem -> write a ModelNew -> evaluate (read its feedback) -> fix -> evaluate again; or \
start_run and poll run_status, then best_kernel. For a whole model: start_apply, then apply_status."""

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
MAX_WAIT_S = 3600.0
POLL_S = 0.5

Sizes = Annotated[str | None, Field(description="module-level size constants of the problem to set, as "
                                                "NAME=N,... e.g. batch_size=16,dim=4096 (default: none)")]
Problem = Annotated[str, Field(description="a suite name such as level1/softmax (see list_problems), a path to "
                                           "a KernelBench-format file, or the problem's source text")]
Device = Annotated[str | None, Field(description="cpu, cuda, cuda:N or auto (default: the server's --device)")]
Size = Annotated[Literal["auto", "full", "small"], Field(
    description="problem sizes: full, or small (SMALL_SIZES, else derived to fit a CPU); auto = full on a GPU, "
                "small on the CPU")]
RunId = Annotated[str, Field(description="a run id from start_run (a unique prefix is enough)")]


def build_server(defaults: Defaults) -> tuple[MCPServer, Runs]:
    from kernelcraft import __version__

    server = MCPServer("kernelcraft", instructions=INSTRUCTIONS, version=__version__)
    runs = Runs(defaults.store_path(), defaults.cache_dir)

    @server.tool(annotations=READ_ONLY)
    def list_problems(level: Annotated[int | None, Field(description="only this level (1, 2 or 3)")] = None):
        """List the bundled KernelBench-format problems: name (e.g. level1/softmax), level and a one-line summary.
        Instant. Pass a name to show_problem, evaluate or start_run."""
        return _answer(tools.list_problems, level)

    @server.tool(annotations=READ_ONLY)
    def show_problem(problem: Problem,
                     small: Annotated[bool, Field(description="at its small (CPU) sizes instead of full")] = False,
                     sizes: Sizes = None):
        """One problem in full: its PyTorch source (class Model, get_inputs), its size constants, and its FLOPs
        and bytes moved at those sizes (the roofline's inputs). Takes a second or so. Read it before writing a
        ModelNew for it."""
        return _answer(tools.show_problem, problem, small, sizes)

    @server.tool()
    def evaluate(problem: Problem,
                 candidate: Annotated[str, Field(description=(
                     "the candidate's full source text: a Python file defining class ModelNew(nn.Module) with the "
                     "problem's init arguments, its kernel inline (CUDA via NVRTC or load_inline, Triton, or C++); "
                     "or example:NAME for a bundled example"))],
                 device: Device = None,
                 policy: Annotated[Literal["strict", "relaxed"], Field(
                     description="tolerance policy: strict (fp32 accuracy) or relaxed (admits tf32/fp16 math)")]
                 = "strict",
                 size: Size = "auto", sizes: Sizes = None,
                 backend: Annotated[str, Field(description=f"{BACKENDS} (default: detected from the source)")] = "",
                 trials: Annotated[int, Field(description="correctness trials, each on fresh inputs", ge=1, le=20)]
                 = 6,
                 compile_baseline: Annotated[bool, Field(description="also time torch.compile (slower)")] = True,
                 timing_budget: Annotated[float, Field(description="seconds of timing, at most", gt=0, le=60)]
                 = 6.0,
                 timeout_s: Annotated[float, Field(
                     description="seconds one call of the candidate may take before it is judged timeout",
                     gt=0, le=tools.MAX_TIMEOUT_S)] = 60.0):
        """Verify one candidate kernel against a problem and time it, exactly as `kernelcraft eval` does: the
        candidate is built and run in an isolated worker process (no network, private temp dir, static and
        runtime anti-cheat guards), checked against the PyTorch reference on several fresh random inputs, then
        timed against PyTorch eager (and torch.compile). Returns the verdict: status (ok, compile_error,
        runtime_error, timeout, incorrect, rejected), correct, runtime_ms, eager_ms, speedup_eager,
        speedup_compile, reasons and message; and `feedback`, the verdict written for you to act on (compiler
        errors, the largest error, where the time went). Takes seconds on a GPU (a load_inline build ~25 s the
        first time), up to a minute or more on a CPU."""
        return _answer(tools.evaluate, defaults, problem, candidate, device=device, policy=policy, size=size,
                       sizes=sizes, backend=backend, trials=trials, compile_baseline=compile_baseline,
                       timing_budget=timing_budget, timeout_s=timeout_s, text="feedback")

    @server.tool()
    def start_run(problem: Problem,
                  model: Annotated[str | None, Field(description=(
                      "PROVIDER/NAME of an LLM to propose kernels (openai/..., anthropic/..., keys from the server's "
                      "environment); default: $KERNELCRAFT_MODEL, else the built-in kernel engineer (no LLM)"))]
                  = None,
                  strategy: Annotated[str, Field(description=(
                      "tree (ideas, then implementations; default), refine, sample or evolve (the built-in "
                      "engineer takes tree or refine)"))] = "tree",
                  rounds: Annotated[int, Field(description="search rounds", ge=1, le=50)] = 5,
                  max_candidates: Annotated[int | None, Field(description="stop after this many candidates",
                                                              ge=1)] = None,
                  max_minutes: Annotated[float | None, Field(description="stop after this many minutes", gt=0)]
                  = None,
                  max_usd: Annotated[float | None, Field(description="stop after this much LLM spend", gt=0)]
                  = None,
                  device: Device = None, size: Size = "auto", sizes: Sizes = None,
                  backend: Annotated[str | None, Field(description=(
                      f"the backend to ask for: {ASKABLE} (default: the proposer's)"))]
                  = None,
                  policy: Annotated[Literal["strict", "relaxed"], Field(description="tolerance policy")]
                  = "strict",
                  compile_baseline: Annotated[bool, Field(description="also time torch.compile")] = True,
                  timing_budget: Annotated[float, Field(description="seconds of timing per candidate", gt=0,
                                                        le=60)] = 6.0,
                  seeds: Annotated[list[str] | None, Field(description=(
                      "starting kernels, each the source text of a ModelNew file (e.g. one you evaluated)"))]
                  = None):
        """Start an optimization run in the background and return its run_id at once (settings are checked
        first: a bad one is this call's error). The proposer writes kernels, each is verified and timed like
        evaluate's, the best kept; everything lands in the run store. A run takes minutes (the built-in engineer
        on a small problem) to hours (an LLM, many rounds). Follow it with run_status (wait=true streams
        progress), then best_kernel and run_report."""
        options = {k: v for k, v in dict(model=model, strategy=strategy, rounds=rounds, max_candidates=max_candidates,
                                         max_minutes=max_minutes, max_usd=max_usd, device=device or defaults.device,
                                         size=size, sizes=sizes, backend=backend, policy=policy,
                                         compile_baseline=compile_baseline, timing_budget=timing_budget).items()
                   if v is not None}

        def start():
            for seed in seeds or ():
                tools.check_candidate_text(seed)
            with tools.problem_hint(problem):
                run_id = runs.start(problem, **options, **({"seeds": list(seeds)} if seeds else {}))
            return {"run_id": run_id, "store": str(runs.store_path),
                    "next": "run_status(run_id) for progress; best_kernel(run_id) once it is done"}

        return _answer(start)

    @server.tool(annotations=READ_ONLY)
    async def run_status(run_id: RunId, ctx: Context,
                         wait: Annotated[bool, Field(description=(
                             "wait until the run ends (or timeout_s), sending progress notifications when the "
                             "call carries a progress token"))] = False,
                         timeout_s: Annotated[float, Field(description="longest wait, in seconds", gt=0,
                                                           le=MAX_WAIT_S)] = 50.0):
        """A run's state from the run store: status (running, done, stopped, failed), stop_reason, round,
        candidates and candidates_evaluated, counts by verdict, the best kernel so far (runtime and speedups;
        final once the run has ended) and an error line if it failed. Instant; with wait=true it returns when
        the run ends or after timeout_s, whichever is first (`timed_out` says which)."""
        try:
            status = await anyio.to_thread.run_sync(_status, runs, run_id)
            if not wait:
                return _result(status)
            deadline = anyio.current_time() + timeout_s
            sent = -1
            while True:
                evaluated = status["candidates_evaluated"]
                if evaluated > sent:
                    await ctx.report_progress(evaluated, status.get("max_candidates"), _progress_line(status))
                    sent = evaluated
                if status["status"] != "running" or anyio.current_time() >= deadline:
                    break
                await anyio.sleep(POLL_S)
                status = await anyio.to_thread.run_sync(_status, runs, status["run_id"])
            status["timed_out"] = status["status"] == "running"
            return _result(status)
        except KernelcraftError as exc:
            raise ToolError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - as _answer says it
            raise _internal(exc) from None

    @server.tool(annotations=READ_ONLY)
    def best_kernel(run_id: RunId):
        """The best verified kernel of a run: its full ModelNew source, runtime_ms, speedups over eager and
        torch.compile, the idea behind it, and its feedback. While the run goes on, the best so far
        (`final`: false). Instant."""
        return _answer(lambda: tools.best_kernel(runs.reader(), run_id), text="source")

    @server.tool(annotations=READ_ONLY)
    def run_report(run_id: Annotated[str, Field(description="a run id (or unique prefix), or a bench id")],
                   full: Annotated[bool, Field(description=(
                       "everything `kernelcraft report --json` has (every candidate's source: long)"))] = False):
        """A run's report as `kernelcraft report` gathers it: the run's settings and counts, the trajectory of
        the best kernel by round, the improvements and the ideas that paid off, by idea category; and one line
        per candidate (status, speedup, a one-line verdict). Instant."""
        return _answer(lambda: tools.run_report(runs.reader(), run_id, full))

    @server.tool()
    def start_apply(problem: Annotated[str, Field(description=(
                        "the model: a path to a Python file defining `model` and `example_inputs` (its weights "
                        "kept) or a KernelBench-format file (class Model, get_inputs, get_init_inputs), a suite name "
                        "such as level3/mlp, or the file's source text"))],
                    model: Annotated[str | None, Field(description=(
                        "PROVIDER/NAME of an LLM to propose kernels; default: $KERNELCRAFT_MODEL, else the built-in "
                        "kernel engineer"))] = None,
                    strategy: Annotated[str, Field(description="tree (default), refine, sample or evolve")] = "tree",
                    rounds: Annotated[int, Field(description="search rounds per region", ge=1, le=50)] = 3,
                    budget_minutes: Annotated[float | None, Field(description=(
                        "the whole apply's wall time: capture, profile, the regions' runs (split by their share of "
                        "the model's time) and the end-to-end verdict"),
                        gt=0)] = None,
                    min_share: Annotated[float, Field(description=(
                        "regions under this share of the model's time stay as they are"), ge=0, lt=1)] = 0.02,
                    replace: Annotated[Literal["faster", "correct"], Field(description=(
                        "which regions' kernels go into the model: those faster than PyTorch, or every correct one"))]
                    = "faster",
                    out_dir: Annotated[str | None, Field(description=(
                        "where the regions' problems and model_new.py are written (default: "
                        "kernelcraft-apply-MODEL under the server's directory)"))] = None,
                    max_candidates: Annotated[int | None, Field(description=(
                        "stop each region's run after this many candidates"), ge=1)] = None,
                    device: Device = None, size: Size = "auto", sizes: Sizes = None,
                    policy: Annotated[Literal["strict", "relaxed"], Field(description="tolerance policy")]
                    = "strict",
                    compile_baseline: Annotated[bool, Field(description="also time torch.compile")] = True,
                    timing_budget: Annotated[float, Field(description="seconds of timing per candidate", gt=0,
                                                          le=60)] = 6.0):
        """Make a whole model faster, in the background (returns apply_id at once): profile it, cut it into
        regions written as problems, optimize each (the largest share of the model's time first), and verify the
        model with its faster regions replaced end to end (out_dir/model_new.py). Minutes to hours. Follow it with
        apply_status."""
        options = {k: v for k, v in dict(model=model, strategy=strategy, rounds=rounds, budget_minutes=budget_minutes,
                                         min_share=min_share, replace=replace, max_candidates=max_candidates,
                                         device=device or defaults.device, size=size, sizes=sizes, policy=policy,
                                         compile_baseline=compile_baseline, timing_budget=timing_budget).items()
                   if v is not None}

        def start():
            with tools.problem_hint(problem):
                apply_id = runs.start_apply(problem, out_dir=out_dir, **options)
            return {"apply_id": apply_id, "store": str(runs.store_path),
                    "next": "apply_status(apply_id) for its regions and, once done, the model end to end"}

        return _answer(start)

    @server.tool(annotations=READ_ONLY)
    def apply_status(apply_id: Annotated[str, Field(description="an apply id from start_apply (a unique prefix)")]):
        """An apply as the run store holds it: status (running, done, stopped, failed), per region its share of the
        model's time, its run and kernel's speedup and what became of it; once done, the model's end-to-end verdict,
        its speedup over eager and torch.compile, the share of its time replaced and the reassembled file. While
        it runs, the regions' runs can be followed with run_status. Instant."""
        return _answer(lambda: tools.apply_status(runs.store_path, apply_id))

    return server, runs


def _status(runs: Runs, run_id: str) -> dict:
    return tools.run_status(runs.reader(), run_id, runs.live)


def _progress_line(status: dict) -> str:
    from kernelcraft.metrics import times

    best = status.get("best") or {}
    speed = f", best {times(best['speedup_eager'])} eager" if best.get("speedup_eager") else ""
    rounds = f"/{status['rounds']}" if status.get("rounds") else ""
    n = status["candidates_evaluated"]
    return f"{status['status']}: round {status['round']}{rounds}, {n} candidate{'' if n == 1 else 's'} evaluated{speed}"


def _answer(fn, *args, text: str | None = None, **kwargs) -> CallToolResult:
    """`fn`'s dict as a tool result; its KernelcraftError (bad input) or any other failure as a tool error."""
    try:
        data = fn(*args, **kwargs)
    except ToolError:
        raise
    except KernelcraftError as exc:
        raise ToolError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - said to the agent; the traceback goes to the server's log
        raise _internal(exc) from None
    return _result(data, text)


def _internal(exc: Exception) -> ToolError:
    """A failure on kernelcraft's side, said in one line (its traceback on the server's stderr)."""
    log.error("tool failed:\n%s", "".join(traceback.format_exception(exc)))
    first = (str(exc).splitlines() or [""])[0][:500]
    return ToolError(f"kernelcraft failed on its side ({type(exc).__name__}: {first}); the server's stderr has "
                     "the traceback, and the server goes on serving")


def _result(data: dict, text: str | None = None) -> CallToolResult:
    """Structured content, and the same as JSON text; `text` names a field (feedback, source) also given as a
    text block of its own, so that it reads as written rather than as an escaped JSON string."""
    content = [TextContent(type="text", text=json.dumps(data, indent=1, default=str))]
    if text and isinstance(data.get(text), str):
        content.append(TextContent(type="text", text=data[text]))
    return CallToolResult(content=content, structured_content=data)
