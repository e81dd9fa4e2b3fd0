"""kernelcraft from Python: evaluate a candidate, optimize a problem, bench a suite, profile a candidate, list
and show problems, read the run store (runs, a run, a candidate's source), a run's report, export rows, score RL
completions. The CLI is a face over these. (Past ~400 lines for a reason: one module is the whole surface every
face calls, a section per command; what each does lives below it.) Nothing here prints; bad input raises a KernelcraftError
(ProblemError, CandidateError, ConfigError, StoreError, ExportError; ProblemTooLarge for a problem the device
cannot hold) with a one-line message.

Problems are given as a path, a suite name (`level1/softmax`) or source text defining `class Model`;
candidates as a path, `example:NAME` or source text defining `class ModelNew`.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from kernelcraft.assemble import SearchSettings
from kernelcraft.errors import ConfigError, KernelcraftError

if TYPE_CHECKING:  # the nouns the api hands back, imported lazily below (most bring torch)
    from kernelcraft.candidate import Candidate
    from kernelcraft.prepare import PreparedApply, PreparedBench, PreparedRun
    from kernelcraft.problems import Problem
    from kernelcraft.problems.sizes import Sizes
    from kernelcraft.verify import Verifier
    from kernelcraft.verify.profile import Profiler

MAX_TRIALS = 1000  # correctness trials of one candidate: more would hold the device for hours, with no gain

OnEvent = Callable[[str, dict], None]


@contextmanager
def _config_errors():
    """A plain ValueError from below (a size, a policy, a device) is bad input: a ConfigError, message kept."""
    try:
        yield
    except KernelcraftError:
        raise
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


# evaluate ---------------------------------------------------------------------------------------------
@dataclass
class Evaluation:
    """One candidate made ready to verify: the problem loaded at its sizes, and a verifier that admits it."""

    problem: Problem
    candidate: Candidate
    sizes: Sizes
    verifier: Verifier

    def run(self):
        """The verdict (a verify.Result); closes the verifier. Raises verify.HarnessTampered where the harness's own
        files changed on disk while it judged (the verdict would rest on whatever rewrote them)."""
        from kernelcraft.verify.integrity import HarnessTampered

        with self.verifier:
            result = self.verifier.evaluate(self.problem, self.candidate)
        if "harness_tampered" in result.reasons:
            raise HarnessTampered(result.message)
        return result


def prepare_evaluation(problem, candidate, *, device: str = "auto", policy: str = "strict", size: str = "auto",
                       sizes: dict | str | None = None, backend: str = "", trials: int = 6,
                       compile_baseline: bool = True, allow_library: bool = True, sanity_bound: float = 10.0,
                       timing_budget: float = 6.0, cache_dir: str | Path | None = None,
                       run_timeout: float | None = None, on_event: OnEvent | None = None) -> Evaluation:
    """What `evaluate` runs, made ready: each input checked in turn (problem, candidate, device, sizes), the
    first bad one the error raised; a problem the device cannot hold raises ProblemTooLarge now. `run_timeout`:
    seconds a call of the candidate may take before it is judged `timeout` (default the verifier's, 60)."""
    with _config_errors():
        from kernelcraft.assemble import parse_sizes
        from kernelcraft.inputs import as_candidate, as_problem
        from kernelcraft.problems.sizes import resolve_sizes
        from kernelcraft.verify import TimingConfig, Verifier, VerifyConfig

        if not 1 <= trials <= MAX_TRIALS:
            raise ConfigError(f"--trials must be from 1 to {MAX_TRIALS}, got {trials}")
        the_problem = as_problem(problem)
        the_candidate = as_candidate(candidate, backend)
        resolved = _devices(device)[0]
        overrides = parse_sizes(sizes)
        # Sizes resolved here too (derivation is cached in-process), so a problem that does not import, or a
        # sizes name it does not define, is said now.
        the_sizes = resolve_sizes(the_problem, size, resolved.split(":")[0], overrides)
        the_problem.load(sizes=the_sizes)
        config = VerifyConfig(policy=policy, trials=trials, size=size, sizes=overrides,
                              compile_baseline=compile_baseline, allow_library=allow_library,
                              sanity_bound=sanity_bound, timing=TimingConfig(budget_s=timing_budget))
        if cache_dir:
            config.cache_dir = Path(cache_dir)
        if run_timeout is not None:
            if run_timeout <= 0:
                raise ConfigError("run_timeout must be a positive number of seconds")
            config.run_timeout = float(run_timeout)
        verifier = Verifier(device, config, on_event=on_event)
        try:
            verifier.admit(the_problem)
        except Exception:
            verifier.close()
            raise
        return Evaluation(the_problem, the_candidate, the_sizes, verifier)


def evaluate(problem, candidate, *, device: str = "auto", policy: str = "strict", size: str = "auto",
             sizes: dict | str | None = None, **options):
    """Verify and time one candidate against a problem; the verdict as a verify.Result (`status`,
    `correct`, `runtime_ms`, `speedup_eager`, `feedback`…; `to_dict()` is the CLI's JSON). Options:
    backend, trials, compile_baseline, allow_library, sanity_bound, timing_budget, cache_dir, run_timeout,
    on_event."""
    return prepare_evaluation(problem, candidate, device=device, policy=policy, size=size, sizes=sizes,
                              **options).run()


def _devices(device: str) -> list[str]:
    from kernelcraft.verify import resolve_devices

    with _config_errors():
        return resolve_devices(device)


# profile ----------------------------------------------------------------------------------------------
@dataclass
class PreparedProfile:
    """A candidate made ready to profile under Nsight Compute: the problem loaded at the sizes it runs at on
    `device`, and a profiler (`profiler.version` is ncu's)."""

    problem: Problem
    candidate: Candidate
    device: str
    sizes: Sizes
    profiler: Profiler
    exact: bool  # the policy computes fp32 exactly (no TF32)

    def run(self, reference: bool = True) -> dict:
        """One call of the candidate profiled (a ProfileError when it cannot be), then one of the reference
        (`reference_error` says why it could not be): what `kernelcraft profile --json` prints."""
        from kernelcraft.verify.profile import ProfileError

        profile = self.profiler.run(self.problem, self.candidate, self.sizes.constants, self.exact)
        ref, ref_error = None, None
        if reference:
            try:
                ref = self.profiler.run(self.problem, None, self.sizes.constants, self.exact)
            except ProfileError as exc:
                ref_error = str(exc)
        return {"problem": self.problem.name, "candidate": self.candidate.name, "backend": self.candidate.backend,
                "device": self.device, "sizes": self.sizes.to_dict(), "profile": profile.to_dict(),
                "reference": ref.to_dict() if ref else None, "reference_error": ref_error}


def prepare_profile(problem, candidate, *, device: str = "cuda", policy: str = "strict", size: str = "auto",
                    sizes: dict | str | None = None, backend: str = "", cache_dir: str | Path | None = None,
                    timeout: float = 300.0) -> PreparedProfile:
    """What `profile` runs, made ready. Checked in turn: Nsight Compute's ncu (on a machine without it nothing
    else matters), the problem, the candidate, the device (a CUDA GPU: `cuda` and `auto` mean cuda:0), the
    sizes (the problem loaded at them, as `evaluate` would run it). A missing ncu or GPU raises
    verify.profile.ProfileError (with its `reason`); bad input a KernelcraftError."""
    from kernelcraft.verify.profile import Profiler, check_device, find_ncu

    find_ncu()
    with _config_errors():
        from kernelcraft.assemble import parse_sizes
        from kernelcraft.inputs import as_candidate, as_problem
        from kernelcraft.problems.sizes import resolve_sizes
        from kernelcraft.verify.policy import get_policy

        the_problem = as_problem(problem)
        the_candidate = as_candidate(candidate, backend)
        the_device = "cuda:0" if device in ("cuda", "auto") else device
        check_device(the_device)
        the_sizes = resolve_sizes(the_problem, size, the_device.split(":")[0], parse_sizes(sizes))
        the_problem.load(sizes=the_sizes)
        exact = not get_policy(policy).allow_tf32
        profiler = Profiler(the_device, Path(cache_dir) if cache_dir else None, timeout)
        return PreparedProfile(the_problem, the_candidate, the_device, the_sizes, profiler, exact)


def profile(problem, candidate, *, reference: bool = True, **options) -> dict:
    """One call of a candidate, and of the reference, under Nsight Compute, summarised (verify/profile): a dict
    with `profile`, `reference` (or `reference_error`), `sizes`, `device`. Options: device, policy, size, sizes,
    backend, cache_dir, timeout. Raises verify.profile.ProfileError where no profile can be had."""
    return prepare_profile(problem, candidate, **options).run(reference)


# optimize ---------------------------------------------------------------------------------------------
def close_unfinished(kind: str, ident: str, message: str, *, store=None) -> None:
    """Store a run or an apply (`kind`) its driver left running, having raised before it could close it, as
    failed, the driver's error (`message`) as its stop reason; one already closed stays as it is."""
    with _opened(store) as the_store:
        if kind == "apply":
            if the_store.apply(ident).running:
                the_store.update_apply(ident, "failed", None)
            return
        row = the_store.run(ident)
        if row.running:
            the_store.finish_run(row.id, "failed", f"server_error: {message}", row.best_candidate)


def stop_runs(run_ids: list[str], *, store=None) -> None:
    """Store the runs still running among `run_ids` as stopped (`interrupted`): `kernelcraft run --resume RUN`
    continues each (a server that exits with runs going)."""
    with _opened(store) as the_store:
        for run_id in run_ids:
            row = the_store.run(run_id)
            if row.running:
                the_store.finish_run(row.id, "stopped", "interrupted", row.best_candidate)


def store_path(store=None) -> Path:
    """The run store's file: `store` where given, else the default ($KERNELCRAFT_HOME, else
    ~/.kernelcraft/runs.db)."""
    from kernelcraft.store import default_path

    return Path(store) if store else default_path()


def is_candidate_source(text: str) -> bool:
    """Whether `text` is the source of a candidate file (Python defining class ModelNew), not a path or a name."""
    from kernelcraft.inputs import is_source

    return is_source(text, "ModelNew")


def open_store(store=None):
    """A Store: the one given, one at a path, or the default (KERNELCRAFT_HOME, else ~/.kernelcraft/runs.db)."""
    from kernelcraft.store import Store

    return store if isinstance(store, Store) else Store(store)


def _is_store(store) -> bool:
    from kernelcraft.store import Store

    return isinstance(store, Store)


def prepare_run(problem=None, *, resume: str | None = None, store=None, out_dir: str | Path | None = None,
                on_event: OnEvent | None = None, **options) -> PreparedRun:
    """What `optimize` runs, made ready (prepare.PreparedRun: its `problem`, `sizes`, `spec`, and `run()`);
    `on_event` hears the verifier's waits. Raises before anything runs."""
    with _config_errors():
        from kernelcraft import prepare

        return prepare.run(problem, resume, store, out_dir, on_event, SearchSettings.of(**options))


def optimize(problem=None, *, model: str | None = None, strategy: str = "tree", rounds: int = 5,
             device: str = "auto", store=None, out_dir: str | Path | None = None, resume: str | None = None,
             on_event: OnEvent | None = None, **options):
    """Optimize one problem: a proposer (`model`: PROVIDER/NAME, or None for the built-in engineer, which takes
    `tree` or `refine`) is asked for kernels, each is verified, the best kept. Returns a search.RunOutcome
    (`run_id`, `status`, `best`: a BestKernel whose `result` is the verifier's Result, `trajectory`…;
    `to_dict()` is the CLI's JSON). The run is recorded in `store` (a Store or a path; default
    KERNELCRAFT_HOME, else ~/.kernelcraft/runs.db); with `out_dir` the best kernel is written there. `resume=RUN`
    continues a stopped run instead, with the settings it was started with (its RunSpec). Options, as the
    CLI's flags: backend, ideas, impls, beam, samples, islands, seed, seeds (starting kernels), max_candidates,
    max_tokens, max_usd, max_minutes, policy, size, sizes, compile_baseline, timing_budget, cache_dir,
    base_url, api_key, … (assemble.SearchSettings lists them). `on_event(kind, data)` hears the progress."""
    prepared = prepare_run(problem, resume=resume, store=store, out_dir=out_dir, on_event=on_event, model=model,
                           strategy=strategy, rounds=rounds, device=device, **options)
    return prepared.run(on_event)


# bench ------------------------------------------------------------------------------------------------
def prepare_bench(problems, *, only: str | list[str] = "", limit: int | None = None, store=None,
                  out_dir: str | Path | None = None, on_event: OnEvent | None = None,
                  runs_at_once: int | None = None, **options) -> PreparedBench:
    """What `bench` runs, made ready (prepare.PreparedBench). Raises before anything runs."""
    with _config_errors():
        from kernelcraft import prepare

        return prepare.bench(problems, only, limit, store, out_dir, on_event, runs_at_once,
                             SearchSettings.of(**options))


def bench(problems, *, model: str | None = None, strategy: str = "tree", device: str = "auto", store=None,
          only: str | list[str] = "", limit: int | None = None, out_dir: str | Path | None = None,
          on_event: OnEvent | None = None, runs_at_once: int | None = None, **options) -> dict:
    """One run per problem with the same strategy and proposer, then KernelBench's metrics. `problems`:
    `level1`…, `all`, a directory, one problem, or a list of problems; `only` keeps names containing a
    fragment, `limit` the first so many; `runs_at_once` runs go together (None: three per GPU, one per device on
    the CPU or with a wall-clock budget). Options as for `optimize`. Returns the bench summary (a dict)."""
    prepared = prepare_bench(problems, only=only, limit=limit, store=store, out_dir=out_dir, on_event=on_event,
                             runs_at_once=runs_at_once, model=model, strategy=strategy, device=device, **options)
    return prepared.run(on_event)


# apply ------------------------------------------------------------------------------------------------
def prepare_apply(problem=None, *, resume: str | None = None, store=None, out_dir: str | Path | None = None,
                  budget_minutes: float | None = None, min_share: float = 0.02, replace: str = "faster",
                  on_event: OnEvent | None = None, **options) -> PreparedApply:
    """What `apply` runs, made ready (prepare.PreparedApply). Raises before anything runs."""
    with _config_errors():
        from kernelcraft import prepare
        from kernelcraft.spec import ApplySettings

        if budget_minutes is not None and budget_minutes <= 0:
            raise ConfigError(f"--budget-minutes must be positive, got {budget_minutes}")
        if not 0 <= min_share < 1:
            raise ConfigError(f"--min-share must be in [0, 1), got {min_share}")
        return prepare.apply(problem, resume, store, out_dir, ApplySettings(budget_minutes, min_share, replace=replace),
                             on_event, SearchSettings.of(**options))


def apply(problem=None, *, model: str | None = None, strategy: str = "tree", rounds: int = 5,
          device: str = "auto", store=None, out_dir: str | Path | None = None, budget_minutes: float | None = None,
          resume: str | None = None, on_event: OnEvent | None = None, **options):
    """Make a whole model faster: profile it, cut it into regions (each written as a problem under
    `out_dir`/regions), optimize each with the proposer (`model`: PROVIDER/NAME, None for the built-in
    engineer) and strategy, the largest share of the model's time first (`budget_minutes`: the whole apply's wall
    time, apply/budget.py; the runs split what is left by share),
    and verify the model with its faster regions replaced (`out_dir`/model_new.py) end to end. `problem`: the
    model's KernelBench-format file, or a Python file defining `model` and `example_inputs` (apply/adapter.py) (Model, get_inputs, get_init_inputs). Returns an apply.engine.ApplyOutcome. Options
    as for `optimize`; `min_share` leaves regions under that share of the model's time as they are; `replace`:
    "faster" (regions whose kernel beats PyTorch) or "correct" (every region with a correct kernel: to verify the
    kernels in the model where none can be faster, as in the Triton interpreter)."""
    prepared = prepare_apply(problem, resume=resume, store=store, out_dir=out_dir, budget_minutes=budget_minutes,
                             on_event=on_event, model=model, strategy=strategy, rounds=rounds, device=device,
                             **options)
    return prepared.run(on_event)


def applies(*, store=None, limit: int = 30) -> list[dict]:
    """The store's applies, newest first: id, model, status, and the headline of each outcome."""
    with _opened(store) as s:
        rows = s.applies(limit)
    from kernelcraft.apply.outcome import ApplyOutcome
    outcomes = [(r, ApplyOutcome.of(r)) for r in rows]
    return [{"apply_id": r.id, "model": r.model, "status": r.status, "created": r.created,
             "speedup_eager": o.speedup_eager if o else None, "replaced": [g.name for g in o.replaced] if o else []}
            for r, o in outcomes]


def apply_summary(apply_id: str, *, store=None) -> dict:
    """One apply's outcome as stored (ApplyOutcome.to_dict(), as far as it got), with its status."""
    with _opened(store) as s:
        row = s.apply(apply_id)
    return {**(row.summary or {"apply_id": row.id, "model": row.model}), "status": row.status}


def backends(device: str | None = None) -> list[dict]:
    """Every backend kernelcraft judges, in the order detection tries them: `name`, `summary`, `devices` (device
    types it runs on), `promptable` (a model can be asked for it); with `device` (cpu, cuda), `unavailable`: why its
    candidates cannot run on that device here, or None."""
    from kernelcraft.backends import BACKENDS

    rows = []
    for b in BACKENDS.values():
        row = {"name": b.name, "summary": b.summary, "devices": list(b.devices), "promptable": b.promptable}
        if device is not None:
            why = b.unavailable(device.split(":")[0])
            row["unavailable"] = why[1] if why else None
        rows.append(row)
    return rows


# problems, report, export -----------------------------------------------------------------------------
def problems(level: int | None = None, directory: str | Path | None = None) -> list[dict]:
    """The bundled suite (or one level of it), or the problem files of `directory`: one dict each with
    `name`, `level` and `summary` (the first line of the problem's docstring). A level with no problems is a
    ConfigError naming the levels there are."""
    from kernelcraft.problems import load_problem_dir, load_suite

    every = load_problem_dir(directory) if directory is not None else load_suite()
    found = [p for p in every if level is None or p.level == level]
    if not found and level is not None:
        levels = sorted({p.level for p in every})
        raise ConfigError(f"no problems at level {level} (levels here: {', '.join(map(str, levels))})")
    rows = []
    for p in found:
        doc = (p.load().__doc__ or "").strip().splitlines()
        rows.append({"name": p.name, "level": p.level, "summary": doc[0] if doc else ""})
    return rows


def problem_info(problem, *, small: bool = False, sizes: dict | str | None = None) -> dict:
    """One problem (a path, a suite name or source text) at its full sizes, or its small ones (`small`: its
    SMALL_SIZES, else sizes derived from its cost), with `sizes` set on top: `name`, `path`, `level`, `sha`, its
    cost (`flops`, `bytes`, `inputs`, `outputs`, …), `sizes`, `sizes_text` and `source`."""
    with _config_errors():
        from kernelcraft.assemble import parse_sizes
        from kernelcraft.inputs import as_problem
        from kernelcraft.problems.cost import compute_cost
        from kernelcraft.problems.sizes import resolve_sizes

        the_problem = as_problem(problem)
        the_sizes = resolve_sizes(the_problem, "small" if small else "full", "cpu", parse_sizes(sizes))
        cost = compute_cost(the_problem.load(sizes=the_sizes))
    return {"name": the_problem.name, "path": str(the_problem.path), "level": the_problem.level,
            "sha": the_problem.sha, **cost.to_dict(), "sizes": the_sizes.to_dict(),
            "sizes_text": the_sizes.describe(), "source": the_problem.source}


@contextmanager
def _opened(store):
    """The store given, or one opened at a path (or the default) and closed after."""
    given = _is_store(store)
    the_store = open_store(store)
    try:
        yield the_store
    finally:
        if not given:
            the_store.close()


def runs(*, store=None, limit: int = 30) -> list[dict]:
    """The latest runs of the store, newest first: `id`, `problem`, `strategy`, `proposer`, `status`,
    `stop_reason`, `created`, `candidates`, the best kernel's `speedup_eager`, `tokens` and `cost`."""
    with _opened(store) as the_store:
        rows = []
        for r in the_store.runs(limit):
            best = the_store.result(r.best_candidate) if r.best_candidate else None
            usage = the_store.usage(r.id)
            rows.append({"id": r.id, "problem": r.problem, "strategy": r.strategy,
                         "proposer": r.proposer, "status": r.status, "stop_reason": r.stop_reason,
                         "created": r.created, "candidates": len(the_store.candidates(r.id)),
                         "speedup_eager": best.speedup_eager if best else None,
                         "tokens": usage.input_tokens + usage.output_tokens, "cost": usage.cost})
        return rows


def run_summary(run: str, *, store=None):
    """One stored run (an id or a unique prefix) as `optimize` summarises it (a search.RunOutcome): its best
    kernel (a BestKernel with its Result), trajectory, counters, and `candidates`, one dict each (`key`, `round`,
    `status`, `runtime_ms`, `speedup_eager`, `idea`, `category`, `backend`)."""
    from kernelcraft.search import outcome

    with _opened(store) as the_store:
        return outcome(the_store, the_store.run(run).id)


def candidate(run: str, key: str, *, store=None) -> dict:
    """One candidate of a stored run, by its key (`r01/i00/m00`, as run_summary lists them): `run_id`, `key`,
    `round`, `status`, `idea`, `category`, `backend`, `origin` and its `source`."""
    from kernelcraft.store import StoreError

    with _opened(store) as the_store:
        run_id = the_store.run(run).id
        rows = the_store.candidates(run_id)
        row = next((c for c in rows if c.key == key), None)
        if row is None:
            keys = [c.key for c in rows]
            listed = ", ".join(keys[:8]) + (f", … ({len(keys)} in all)" if len(keys) > 8 else "")
            raise StoreError(f"no candidate {key!r} in run {run_id} (its keys: {listed or 'none'})")
        return {"run_id": run_id, "key": row.key, "round": row.round, "status": row.state, "idea": row.idea,
                "category": row.category, "backend": row.backend, "origin": row.origin, "source": row.source}


def run_status(run: str, *, store=None) -> dict:
    """A run's state from the store (an id or a unique prefix): `status`, `stop_reason`, its round and rounds,
    candidates made and evaluated (`by_status`), its budget, its seconds once ended, `best` (the best kernel's
    headline, `final` once the run ended) and `error` (why its proposer could not answer, if that stopped it)."""
    from kernelcraft.report import status

    with _opened(store) as the_store:
        return status.run_status(the_store, run)


def best_kernel(run: str, *, store=None) -> dict:
    """The best verified kernel of a run (an id or a unique prefix): its `source`, figures and `feedback` (what a
    proposer is told of it); `final` once the run ended. A KernelcraftError where it has no correct kernel yet."""
    from kernelcraft.report import status

    with _opened(store) as the_store:
        return status.best_kernel(the_store, run)


def feedback(result, *, profile: dict | None = None) -> str:
    """What a proposer is told of a verdict (a Result): why it failed, or how fast it was and what to try."""
    from kernelcraft.propose.feedback import render

    return render(result, profile=profile)


def report(*runs: str, store=None, compact: bool = False) -> dict:
    """The report `kernelcraft report` renders: of a run, a bench or an apply (an id, or a unique prefix), or of
    two runs or benches side by side. `kind` says which: run, bench, apply, compare_runs or compare_benches.
    `compact`: a run's report cut for an agent (one short line per candidate, no sources)."""
    from kernelcraft.report import data, status
    from kernelcraft.store import Store, StoreError

    if len(runs) not in (1, 2):
        raise ConfigError("give one RUN, or two to compare")
    if not isinstance(store, Store) and not store_path(store).is_file():
        raise StoreError(f"no run store at {store_path(store)}")
    with _opened(store) as the_store:
        reports = [data.gather(the_store, ident) for ident in runs]
        if len(reports) == 2:
            return data.compare(*reports)
        return status.compact(the_store, reports[0]) if compact else reports[0]


@dataclass
class Exported:
    """Rows exported from the run store, and what was read to make them."""

    kind: str
    rows: list[dict]
    stats: dict  # runs, candidates (read), duplicates (dropped)
    filters: dict
    path: Path | None = None  # the file written, if any
    format: str | None = None

    def summary(self) -> dict:
        return {"kind": self.kind, "format": self.format, "path": str(self.path) if self.path else None,
                "rows": len(self.rows), "runs": self.stats["runs"], "candidates_read": self.stats["candidates"],
                "duplicates_dropped": self.stats["duplicates"], "filters": self.filters}


def export(runs: str | list[str], kind: str, *, store=None, out: str | Path | None = None, format: str | None = None,
           force: bool = False, correct_only: bool = False, min_speedup: float | None = None,
           baseline: str = "eager", statuses=(), categories=(), model: str | None = None,
           on_event: OnEvent | None = None) -> Exported:
    """Dataset rows from the run store (docs/export.md): `kind` sft, rl or trajectories, of runs or benches
    (ids or unique prefixes). With `out` they are also written (jsonl, or parquet for a .parquet path or
    format="parquet"; an existing file only with force). `on_event("export", …)` hears the start."""
    from kernelcraft.export import SCHEMAS, ExportError, Filters, build_rows, guess_format, resolve_runs, write_rows
    from kernelcraft.export.prompts import render_prompt
    from kernelcraft.propose.base import CATEGORIES
    from kernelcraft.store import Store

    refs = [runs] if isinstance(runs, str) else list(runs)
    filters = Filters(correct_only=correct_only, min_speedup=min_speedup, baseline=baseline,
                      statuses=tuple(statuses), categories=tuple(categories), model=model)
    fmt = (format or guess_format(out)) if out is not None else format
    filters.check(kind)
    unknown = [c for c in filters.categories if c not in CATEGORIES and c != "uncategorized"]
    if unknown:
        raise ExportError(f"--category {unknown[0]}: unknown; choose from {', '.join(CATEGORIES)}, uncategorized")
    if out is not None and Path(out).exists() and not force:
        raise ExportError(f"{Path(out)} exists; pass --force to replace it")
    given = isinstance(store, Store)
    if store is not None and not given and not Path(store).exists():
        raise ExportError(f"no run store at {store}")
    the_store = store if given else Store(store)
    try:
        chosen = resolve_runs(the_store, refs)
        if on_event:
            on_event("export", {"kind": kind, "runs": len(chosen), "store": str(the_store.path)})
        rows, stats = build_rows(the_store, chosen, kind, filters, render_prompt)
    finally:
        if not given:
            the_store.close()
    path = write_rows(rows, SCHEMAS[kind], fmt, Path(out), force=force) if out is not None else None
    return Exported(kind, rows, stats, filters.to_dict(), path, fmt)


# rl ---------------------------------------------------------------------------------------------------
def rl_score(rows, completions, *, device: str | None = None, cache_dir: str | Path | None = None,
             shape: dict | None = None, cache: bool = True, verifier=None, cluster: str | None = None,
             actors: int | None = None, on_event: OnEvent | None = None, on_score: Callable | None = None):
    """Score completions against RL rows (docs/rl.md): `rows` a JSONL/Parquet file `kernelcraft export --kind rl`
    wrote, or the rows; `completions` a JSONL file, or dicts, each with `completion` and `row` (the row's
    extra_info.index) or `problem`. Every completion is verified at once through the verifier's pool (a local one
    per setting the rows ask for, on the Ray cluster `cluster` names if any, or `verifier`), verdicts cached under
    `cache_dir`; `shape` sets the reward's
    parameters. Returns a kernelcraft.rl.Batch (scores in order, throughput). `on_score(index, score)` hears each
    as it comes."""
    from kernelcraft.rl import RewardShape, Scorer
    from kernelcraft.rl.inputs import pair, read_completions, read_rows

    with _config_errors():
        shape = RewardShape.of(shape)  # the settings first, then the files
        the_rows = read_rows(rows) if isinstance(rows, (str, Path)) else list(rows)
        items = read_completions(completions) if isinstance(completions, (str, Path)) else list(completions)
        pairs = pair(the_rows, items, str(completions) if isinstance(completions, (str, Path)) else "completions")
        scorer = Scorer(verifier, shape=shape, cache_dir=cache_dir, device=device, cache=cache, on_event=on_event,
                        cluster=cluster, actors=actors)
    with scorer, _config_errors():
        tasks = {}  # one Task per row: its problem is read once however many completions answer it
        items = [(tasks.setdefault(id(row), scorer.task(row)), text) for row, text in pairs]
        if on_event:
            on_event("rl_score", {"completions": len(items), "rows": len(the_rows)})
        return scorer.score_batch(items, on_score)


def __getattr__(name: str):
    """The prepared jobs' types (prepare.py), imported when asked for: they bring torch, which the CLI's quick
    commands never need."""
    if name in ("PreparedApply", "PreparedBench", "PreparedRun"):
        from kernelcraft import prepare

        return getattr(prepare, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ConfigError", "Evaluation", "Exported", "KernelcraftError", "PreparedApply", "PreparedBench",
           "PreparedProfile", "PreparedRun", "SearchSettings", "bench", "candidate", "evaluate", "export", "open_store", "optimize",
           "prepare_bench", "prepare_evaluation", "prepare_profile", "prepare_run", "problem_info", "problems",
           "profile", "report", "rl_score", "run_summary", "runs"]
