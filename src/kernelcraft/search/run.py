"""A run from start to end: create it in the store (or pick it up again), let its strategy work,
close it, and write the best kernel out as a standalone ModelNew file."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from kernelcraft.errors import RunInterrupted
from kernelcraft.ledger import run_error, stored_counts, trajectory
from kernelcraft.problems import Problem, load_problem
from kernelcraft.propose.base import Proposer
from kernelcraft.records import FAILING, REFUSED, CandidateRecord  # noqa: F401 - the stop reasons, said here too
from kernelcraft.result import Result, json_safe
from kernelcraft.search.engine import Engine
from kernelcraft.search.records import Cand, Counters
from kernelcraft.search.strategies import get_strategy
from kernelcraft.spec import RunSpec
from kernelcraft.store import Store, StoreError, new_id
from kernelcraft.verify import JobFront

CLEAN_ENDS = ("budget_", "proposer_exhausted")  # stop reasons of a run that ended as planned


@dataclass
class BestKernel:
    """A run's fastest correct candidate: where it came from and the verifier's Result."""

    candidate: int  # its id in the store
    key: str
    round: int
    idea: str | None
    category: str | None
    backend: str
    result: Result
    profile: dict | None = None  # Nsight Compute's counters summarised, when it was profiled (--profile)

    def to_dict(self) -> dict:
        return {"candidate": self.candidate, "key": self.key, "round": self.round, "idea": self.idea,
                "category": self.category, "backend": self.backend, "result": self.result.to_dict(),
                "profile": self.profile}


@dataclass
class RunOutcome:
    run_id: str
    problem: str
    strategy: str
    proposer: str
    device: str
    status: str  # done | stopped | failed
    stop_reason: str | None
    best: BestKernel | None
    best_file: str | None
    trajectory: list[dict]  # per round: best so far
    counters: Counters
    wall_seconds: float
    gpu_idle_fraction: float
    overhead_ms_per_candidate: float | None
    candidates: list[dict] = field(default_factory=list)  # one each: key, round, status, time, speedup, idea
    error: str | None = None  # one line, when the run stopped because its proposer could not answer
    # per device that judged (this session): name, node, candidates judged, busy seconds, utilisation
    devices: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["best"] = self.best.to_dict() if self.best else None
        return json_safe(d)  # JSON has no NaN (a stored run's idle fraction is unknown)


def start_run(store: Store, problem: Problem, proposer: Proposer, verifier: JobFront, spec: RunSpec,
              out_dir: Path | None = Path("."), bench_id: str | None = None,
              on_event: Callable[[str, dict], None] | None = None, cancel=None,
              apply_id: str | None = None) -> RunOutcome:
    """A new run, its `spec` stored as given (a resume reads it back). `bench_id`, `apply_id`: the bench it is one
    problem of, the apply it is one region of. `cancel` (a threading.Event) set stops it as an interrupt would."""
    config = spec.run
    config.check()
    get_strategy(config.strategy)
    run_id = new_id()
    store.create_run(run_id, problem.name, problem.source, proposer.name, verifier.devices[0], spec, bench_id,
                     apply_id)
    return _drive(store, run_id, problem, proposer, verifier, config, out_dir, on_event, cancel)


def resume_run(store: Store, run_id: str, proposer: Proposer, verifier: JobFront, out_dir: Path | None = Path("."),
               on_event: Callable[[str, dict], None] | None = None) -> RunOutcome:
    row = store.run(run_id)
    problem = stored_problem(store, row.id, row.problem, row.problem_source)
    store.reopen_run(row.id)
    return _drive(store, row.id, problem, proposer, verifier, row.spec.run, out_dir, on_event,
                  earlier_s=row.elapsed or 0.0)


def stored_problem(store: Store, owner: str, name: str, source: str) -> Problem:
    """The problem `name` of a stored run or apply (`owner`: its id) as it was when it started: the file where it
    is unchanged, else its source as the store keeps it."""
    try:
        problem = load_problem(name)
        if problem.source == source:
            return problem
    except Exception:  # noqa: BLE001 - a moved or edited file: fall back to the stored source
        pass
    path = store.path.parent / "problems" / owner / (Path(name).stem + ".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    problem = load_problem(path)
    problem.name = name
    return problem


def _drive(store, run_id, problem, proposer, verifier, config, out_dir, on_event, cancel=None,
           earlier_s: float = 0.0) -> RunOutcome:
    """Run the strategy to its end; the run's wall time (and its wall budget) counts `earlier_s`, what a resumed
    run ran before, and is stored at every end so that a resume goes on from it (a run killed outright keeps the
    last stored figure)."""
    if on_event is not None:
        on_event("run_started", {"run_id": run_id, "problem": problem.name, "resumed": earlier_s > 0})
    engine = Engine(store, run_id, problem, proposer, verifier, config, on_event, cancel, earlier_s)
    try:
        get_strategy(config.strategy)(engine)
        engine.drain()
        reason = engine.stopped()
        status = "stopped" if reason and not reason.startswith(CLEAN_ENDS) else "done"
    except KeyboardInterrupt:  # what is stored stays; `--resume` goes on from there
        engine.close(cancel=True)
        store.finish_run(run_id, "stopped", "interrupted", _best_id(engine), engine.wall_seconds())
        raise RunInterrupted(run_id) from None
    except BaseException:
        engine.close(cancel=True)
        store.finish_run(run_id, "failed", engine.stop_reason, _best_id(engine), engine.wall_seconds())
        raise
    engine.close()
    best = engine.best(1)
    store.finish_run(run_id, status, engine.stop_reason, best[0].id if best else None, engine.wall_seconds())
    best_file = write_best(best[0], problem, run_id, out_dir) if best and out_dir else None
    return outcome(store, run_id, engine, best_file)


def _best_id(engine: Engine) -> int | None:
    best = engine.best(1)
    return best[0].id if best else None


def write_best(cand: Cand, problem: Problem, run_id: str, out_dir: Path) -> str:
    r = cand.result
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{Path(problem.name).stem}_{run_id}.py"
    speed = f"{r.speedup_eager:.2f}x eager" if r.speedup_eager else "no eager time"
    if r.speedup_compile:
        speed += f", {r.speedup_compile:.2f}x torch.compile"
    header = (f"# kernelcraft run {run_id}: the fastest correct kernel found for {problem.name}\n"
              f"# {r.runtime_ms:.4f} ms ({speed}) on {r.device}, backend {cand.backend}, "
              f"policy {r.policy}, round {cand.round}\n")
    if cand.idea:
        header += f"# idea ({cand.idea.category}): {cand.idea.text}\n"
    path.write_text(header + cand.source)
    return str(path)


def outcome(store: Store, run_id: str, engine: Engine | None = None, best_file: str | None = None) -> RunOutcome:
    """A run's summary from the store (`engine` adds this session's live figures)."""
    row = store.run(run_id)
    rows = store.candidates(row.id)
    best = next((c for c in rows if c.id == row.best_candidate), None)
    best_info = None
    if best:
        best_info = BestKernel(best.id, best.key, best.round, best.idea, best.category,
                               best.backend, store.result(best.id), store.profile(best.id))
    counters = engine.count if engine else _stored_counters(store, row.id, rows)
    per = max(counters.candidates, 1)
    return RunOutcome(
        row.id, row.problem, row.strategy, row.proposer, row.device, row.status, row.stop_reason,
        best_info, best_file, trajectory(rows), counters,
        engine.wall_seconds() if engine else row.wall_seconds,
        engine.gpu_idle_fraction() if engine else float("nan"),
        1000 * counters.overhead_s / per if engine else None,
        [{"key": c.key, "round": c.round, "status": c.state, "speedup_eager": c.speedup_eager,
          "runtime_ms": c.runtime_ms, "category": c.category, "idea": c.idea, "backend": c.backend}
         for c in rows], run_error(row), engine.device_usage() if engine else [])


def _stored_counters(store: Store, run_id: str, rows: list[CandidateRecord]) -> Counters:
    return Counters(**stored_counts(store, run_id, rows))


__all__ = ["BestKernel", "RunInterrupted", "RunOutcome", "start_run", "resume_run", "outcome", "run_error", "StoreError", "REFUSED", "FAILING"]
