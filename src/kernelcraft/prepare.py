"""A run, a bench or an apply made ready (a new one, or a stopped one to resume): every setting checked, the RunSpec
it is stored with made (or read back), its Session built (store, proposer, verifier). Nothing runs until `run()`,
which drives it and closes its session. Bad input raises before anything starts (ConfigError, ProblemError, …)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from kernelcraft import assemble
from kernelcraft.assemble import SearchSettings
from kernelcraft.errors import ConfigError
from kernelcraft.problems import Problem
from kernelcraft.problems.sizes import Sizes, resolve_sizes
from kernelcraft.session import Session
from kernelcraft.spec import ApplySettings, ApplySpec, RunSpec

OnEvent = Callable[[str, dict], None]


@dataclass
class PreparedRun:
    """A run made ready. `problem` and `sizes` are None when resuming: the store keeps them."""

    session: Session
    spec: RunSpec
    problem: Problem | None
    sizes: Sizes | None
    resume: str | None = None
    out_dir: Path | None = None

    def run(self, on_event: OnEvent | None = None):
        """The run's summary (a search.RunOutcome); the session closed."""
        from kernelcraft.search import resume_run, start_run

        with self.session as s:
            if self.resume:
                return resume_run(s.store, self.resume, s.proposer, s.verifier, self.out_dir, on_event)
            return start_run(s.store, self.problem, s.proposer, s.verifier, self.spec, self.out_dir,
                             on_event=on_event)


def run(problem, resume: str | None, store, out_dir: str | Path | None, on_event: OnEvent | None,
        s: SearchSettings) -> PreparedRun:
    from kernelcraft.inputs import as_problem

    session = Session(store)
    with session.building():
        sizes = the_problem = None
        if resume:
            if problem is not None:
                raise ConfigError("give either PROBLEM or --resume RUN, not both")
            spec = session.store.run(resume).spec
            on = _resumed_on(s, spec)
            devices = assemble.devices(on)
        else:
            if problem is None:
                raise ConfigError("a PROBLEM (file or suite name) is required, or --resume RUN")
            the_problem = as_problem(problem)
            devices = assemble.devices(s)
            sizes = resolve_sizes(the_problem, s.size, devices[0].split(":")[0], s.size_overrides)
            the_problem.load(sizes=sizes)  # a problem that does not import: said now
            spec, on = assemble.run_spec(s, devices, sizes), s
        proposer = session.build_proposer(spec, s, devices[0])
        if the_problem is not None:  # the built-in engineer says what it cannot do
            proposer.coverage(the_problem, spec.run.backend)
        session.build_verifier(spec, s, on_event, on, the_problem)
    return PreparedRun(session, spec, the_problem, sizes, resume, Path(out_dir) if out_dir else None)


def _resumed_on(s: SearchSettings, spec: RunSpec) -> SearchSettings:
    """The settings a resumed run is judged under: its stored device, on the cluster it is given now (or on this
    machine)."""
    if spec.verify is None:
        return s
    device = spec.verify.device
    if device.startswith("cuda:") and assemble.cluster_of(s):  # a run begun on one GPU, resumed over the cluster's
        device = "cuda"
    return replace(s, device=device)


@dataclass
class PreparedBench:
    """A bench made ready: its problems chosen, its session built."""

    session: Session
    spec: RunSpec
    name: str
    problems: list[Problem]
    out_dir: Path | None = None
    runs_at_once: int | None = None  # None: search.bench.runs_at_once

    def run(self, on_event: OnEvent | None = None) -> dict:
        """The bench summary: `bench_id`, `suite`, one row per problem, `metrics` (fast_p and kin)."""
        from kernelcraft.search import run_bench

        with self.session as s:
            return run_bench(s.store, self.name, self.problems, s.proposer, s.verifier, self.spec, self.out_dir,
                             on_event, self.runs_at_once)


def bench(problems, only: str | list[str], limit: int | None, store, out_dir: str | Path | None,
          on_event: OnEvent | None, runs_at_once: int | None, s: SearchSettings) -> PreparedBench:
    from kernelcraft.inputs import problem_set

    if runs_at_once is not None and runs_at_once < 1:
        raise ConfigError(f"--runs-at-once must be at least 1, got {runs_at_once}")
    chosen = problem_set(problems)
    keep = [k.strip() for k in (only.split(",") if isinstance(only, str) else only) if k.strip()]
    if keep:
        chosen = [p for p in chosen if any(k in p.name for k in keep)]
    chosen = chosen[:limit] if limit else chosen
    name = problems if isinstance(problems, (str, Path)) else ",".join(p.name for p in chosen)
    if not chosen:
        raise ConfigError(f"no problems in {str(name)!r} match")
    devices = assemble.devices(s)
    spec = assemble.run_spec(s, devices)
    assemble.check_overrides(spec.verify.size_overrides, chosen)
    session = Session(store)
    with session.building():
        session.build(spec, s, devices[0], on_event, s)
    return PreparedBench(session, spec, str(name), chosen, Path(out_dir) if out_dir else None, runs_at_once)


@dataclass
class PreparedApply:
    """An apply made ready: the model's file loaded at its sizes, its session built."""

    session: Session
    spec: ApplySpec
    problem: Problem
    sizes: Sizes
    resume: str | None = None

    @property
    def out_dir(self) -> Path:
        return Path(self.spec.out_dir)

    def run(self, on_event: OnEvent | None = None):
        """The apply's outcome (an apply.engine.ApplyOutcome; `to_dict()` is the CLI's JSON)."""
        from kernelcraft.apply.engine import run_apply

        with self.session as s:
            return run_apply(s.store, self.problem, self.sizes, s.proposer, s.verifier, self.spec, on_event,
                             self.resume)


def apply(problem, resume: str | None, store, out_dir: str | Path | None, settings: ApplySettings,
          on_event: OnEvent | None, s: SearchSettings) -> PreparedApply:
    from kernelcraft.apply.adapter import is_model_file, model_problem
    from kernelcraft.inputs import as_problem
    from kernelcraft.search.run import stored_problem
    from kernelcraft.verify import resolve_devices

    if s.cluster or s.actors:
        raise ConfigError("--cluster: apply times the model on this machine's device; run it without a cluster")
    session = Session(store)
    with session.building():
        if resume:
            if problem is not None:
                raise ConfigError("give either MODEL or --resume APPLY, not both")
            record = session.store.apply(resume)
            resume, spec = record.id, record.spec
            the_problem = stored_problem(session.store, record.id, record.model, record.model_source)
            devices = resolve_devices(spec.spec.verify.device)
            verify = spec.spec.verify
            sizes = resolve_sizes(the_problem, verify.size, devices[0].split(":")[0], verify.size_overrides)
        else:
            if problem is None:
                raise ConfigError("a MODEL (a KernelBench-format file) is required, or --resume APPLY")
            given = Path(problem) if isinstance(problem, (str, Path)) else None
            if given is not None and is_model_file(given):  # `model` and `example_inputs`: made a problem
                out = Path(out_dir or f"kernelcraft-apply-{given.stem}")
                the_problem = model_problem(given, out)
            else:
                the_problem = as_problem(problem)
                out = Path(out_dir or f"kernelcraft-apply-{the_problem.name.replace('/', '_')}")
            devices = resolve_devices(s.device)
            sizes = resolve_sizes(the_problem, s.size, devices[0].split(":")[0], s.size_overrides)
            the_problem.load(sizes=sizes)
            spec = ApplySpec(assemble.run_spec(s, devices), settings, str(out))
        session.build(spec.spec, s, devices[0], on_event, problem=the_problem)
    return PreparedApply(session, spec, the_problem, sizes, resume)
