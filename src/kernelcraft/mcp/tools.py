"""What the MCP tools do, as plain functions over kernelcraft.api: each takes the tool's arguments, returns a
JSON-able dict, and raises a KernelcraftError whose one-line message says what to pass instead. The SDK
wiring (server.py) only turns these into tool results; nothing here knows of MCP or prints."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kernelcraft import api
from kernelcraft.errors import CandidateError, ConfigError, ProblemError

SUMMARY_KEYS = ("status", "correct", "reasons", "runtime_ms", "eager_ms", "compile_ms", "speedup_eager",
                "speedup_compile", "max_rel_error", "roofline_fraction", "backend", "device", "policy",
                "problem", "candidate", "wall_seconds")
MAX_TIMEOUT_S = 600.0  # the longest a candidate's call may run before it is judged `timeout`


@dataclass
class Defaults:
    """What the server was started with: the run store, the device, the build cache."""

    store: Path | None = None  # None: the CLI's default (KERNELCRAFT_HOME, else ~/.kernelcraft/runs.db)
    device: str = "auto"
    cache_dir: Path | None = None

    def store_path(self) -> Path:
        return api.store_path(self.store)


# problems ---------------------------------------------------------------------------------------------
def list_problems(level: int | None = None) -> dict:
    rows = api.problems(level)
    return {"problems": rows, "count": len(rows)}


def show_problem(problem: str, small: bool = False, sizes: str | dict | None = None) -> dict:
    """A problem's source, sizes, FLOPs and bytes, as `kernelcraft problems show` computes them."""
    with problem_hint(problem):
        return api.problem_info(problem, small=small, sizes=sizes)


# evaluate ---------------------------------------------------------------------------------------------
def evaluate(defaults: Defaults, problem: str, candidate: str, *, device: str | None = None,
             policy: str = "strict", size: str = "auto", sizes: str | dict | None = None, backend: str = "",
             trials: int = 6, compile_baseline: bool = True, timing_budget: float = 6.0,
             timeout_s: float = 60.0) -> dict:
    """The verdict on one candidate (source text) and the feedback a proposer gets for it."""
    check_candidate_text(candidate)
    if not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise ConfigError(f"timeout_s must be above 0 and at most {MAX_TIMEOUT_S:g} seconds")
    with problem_hint(problem):
        try:
            result = api.evaluate(problem, candidate, device=device or defaults.device, policy=policy, size=size,
                                  sizes=sizes, backend=backend, trials=trials, compile_baseline=compile_baseline,
                                  timing_budget=timing_budget, cache_dir=defaults.cache_dir, run_timeout=timeout_s)
        except CandidateError as exc:
            raise CandidateError(f"the candidate is not usable: {exc}") from None
    data = result.to_dict()  # the JSON the CLI's eval --json prints, cut to what an agent reads
    verdict = {k: data[k] for k in SUMMARY_KEYS}
    verdict["message"] = result.message[:2000]
    verdict["sizes"] = result.sizes.get("constants")
    verdict["feedback"] = api.feedback(result)
    return verdict


def check_candidate_text(candidate: str) -> None:
    """Candidates arrive as source text (or `example:NAME`); a path would have the server read files."""
    if not isinstance(candidate, str) or not candidate.strip():
        raise CandidateError("candidate is empty: pass the full source text of a Python file defining "
                             "class ModelNew(nn.Module)")
    if candidate.startswith("example:") or api.is_candidate_source(candidate):
        return
    if re.fullmatch(r"[\w./:~\\-]+", candidate.strip()):  # one word, as a path or a name is
        raise CandidateError("candidate must be source text, not a path or a name: pass the whole file's contents "
                             "(Python defining class ModelNew), or example:NAME for a bundled example")
    raise CandidateError("candidate is not a Python file defining class ModelNew: a kernel in CUDA, C++ or "
                         "Triton goes inside a Python file whose class ModelNew(nn.Module) builds and calls it")


class problem_hint:
    """An unknown problem said as the library says it (with the suite names that come close), then how an agent
    lists them all."""

    def __init__(self, problem):
        self.problem = problem

    def __exit__(self, kind, exc, tb):
        if kind is None or not issubclass(kind, ProblemError) or not isinstance(self.problem, str):
            return False
        if "no problem file or suite problem named" not in str(exc):
            return False
        said = str(exc).replace("; `kernelcraft problems list` shows the suite", "")
        raise ProblemError(f"{said} (list_problems lists the suite's {len(api.problems())} problems; a problem may "
                           "also be given as KernelBench-format source text defining class Model)") from None

    def __enter__(self):
        return self


# runs -------------------------------------------------------------------------------------------------
def run_status(store, run_id: str, live_of=None) -> dict:
    """A run's state from the store (api.run_status), with what this server heard of it live (`live_of(run id)`:
    Runs.live)."""
    out = api.run_status(run_id, store=store)
    live = live_of(out["run_id"]) if live_of else None
    if live:
        out.update({k: v for k, v in live.items() if v is not None})
    return out


def best_kernel(store, run_id: str) -> dict:
    """The best verified kernel of a run: its source, figures and feedback."""
    return api.best_kernel(run_id, store=store)


def run_report(store, run_id: str, full: bool = False) -> dict:
    """`kernelcraft report`'s data; compact unless `full`: one short line per candidate, no sources."""
    return api.report(run_id, store=store, compact=not full)


# apply ------------------------------------------------------------------------------------------------
def apply_status(store_path: Path, apply_id: str) -> dict:
    """An apply's stored outcome, cut to what an agent reads: its regions' headlines (not their full verdicts)."""
    summary = api.apply_summary(apply_id, store=store_path)
    for region in summary.get("regions", []):
        region.pop("result", None)
    e2e = summary.get("end_to_end")
    if e2e:
        summary["end_to_end"] = {k: e2e.get(k) for k in SUMMARY_KEYS if k in e2e} | {"message": e2e["message"][:2000]}
    compiled = summary.get("compiled") or {}
    if compiled.get("end_to_end"):
        c = compiled["end_to_end"]
        compiled["end_to_end"] = {k: c.get(k) for k in SUMMARY_KEYS if k in c} | {"message": c["message"][:2000]}
    graphs = summary.get("compile_graphs")  # torch.compile of the model with CUDA graphs, verified (cuda_graphs.py)
    if graphs:
        summary["compile_graphs"] = {k: graphs.get(k) for k in SUMMARY_KEYS if k in graphs} | {
            "message": graphs["message"][:2000]}
    return summary
