"""`kernelcraft apply`, whole: profile a model, cut it into regions written as problems, optimize each region as a run
(the largest share of the model's time first, the time budget split by share), replace the regions whose verified
kernel is faster than PyTorch, and verify the reassembled model end to end against the model's own file (settle.py),
as it runs eager and compiled; the model given back is the fastest of those and torch.compile's (times.py). Where the
model is host-bound on a GPU the compiled forms replay CUDA graphs, torch.compile's with them among the final
models (cuda_graphs.py).

The weights of the regions' problem files are drawn under the apply's seed, never the verifier's (it draws fresh
ones each evaluation): a kernel that kept a copy of the weights it was built with, rather than reading the
model's, is caught end to end. Where the reassembled model is wrong, each replaced region is verified alone in
the model and those that fail are put back to PyTorch; where it is slower than the model, the regions that gained
least are put back, and where nothing is faster the model stays as it is. Everything lands in the run store: the
apply (its plan, profile and outcome) and each region's run (carrying the apply's id), so `--resume` continues an
apply that was stopped: the model is captured again, but its profile (each region's share, and so the plan) is the
stopped apply's, not measured again, and every region run that finished is reused whatever the new plan says.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from kernelcraft.apply import cuda_graphs
from kernelcraft.apply.budget import SMALLEST_RUN_S, Deadline
from kernelcraft.apply.extract import Extraction, extract_model, write_problems
from kernelcraft.apply.instances import instances
from kernelcraft.apply.outcome import (
    COMPILED_FILE,
    MANIFEST,
    MODEL_FILE,
    ApplyError,
    ApplyOutcome,
    CompiledForm,
    RegionOutcome,
)
from kernelcraft.apply.plan import RegionPlan, fund, plan
from kernelcraft.apply.profile import Profile, profile
from kernelcraft.apply.settle import OnEvent, settle
from kernelcraft.apply.times import baselines, final_times
from kernelcraft.errors import ApplyInterrupted, KernelcraftError
from kernelcraft.problems import Problem, load_problem
from kernelcraft.records import RunRecord
from kernelcraft.search.bench import uncovered
from kernelcraft.search.run import RunOutcome, outcome, resume_run, start_run
from kernelcraft.spec import ApplySettings, ApplySpec, RunSpec
from kernelcraft.store import Store, new_id
from kernelcraft.verify.policy import get_policy, reference_math

__all__ = ["COMPILED_FILE", "MANIFEST", "MODEL_FILE", "ApplyError", "ApplyInterrupted", "ApplyOutcome",
           "ApplySettings", "CompiledForm", "RegionOutcome", "run_apply"]

def run_apply(store: Store, problem: Problem, sizes, proposer, verifier, spec: ApplySpec,
              on_event: OnEvent | None = None, resume: str | None = None) -> ApplyOutcome:
    """Apply kernels to `problem`'s model (loaded at `sizes`) as `spec` says (its RunSpec is each region run's,
    stored with it as a run's is). With `resume`, the apply of that id continues."""
    emit = on_event or (lambda kind, data: None)
    out_dir = Path(spec.out_dir).resolve()
    apply = spec.apply
    kept = None  # the stopped apply's profile, kept on resume: its shares decided its plan and its runs
    if resume:
        apply_id = resume
        stopped = ApplyOutcome.of(store.apply(apply_id))
        kept = stopped.profile if stopped else None
        store.update_apply(apply_id, "running")
    else:
        apply_id = new_id("apply-")
        store.create_apply(apply_id, problem.name, problem.source, ApplySpec(spec.spec, apply, str(out_dir)))
    device = verifier.devices[0]
    result = ApplyOutcome(apply_id, problem.name, "", device, "failed", None, [])
    deadline = Deadline.of(apply.budget_minutes)
    try:
        emit("apply_stage", {"stage": "capture", "apply_id": apply_id})
        exact = not get_policy(verifier.config.policy).allow_tf32
        extraction, prof = _cut(problem, sizes, device, apply.seed, exact, out_dir, emit, kept,
                                verifier.config.cpu_threads)
        result.method, result.profile, result.notes = extraction.method, prof, list(extraction.notes)
        if kept is not None and prof is kept:
            result.notes.append("resumed: the stopped apply's profile is kept (its regions' shares, and so the plan "
                                "its region runs followed), not measured again")
        _store(store, result, "running")  # the profile, before any run: a resume goes by it
        if deadline.budget_s is not None:  # measured now (kept for the end), so the runs' budget is what is left
            emit("apply_stage", {"stage": "baselines", "apply_id": apply_id})
            measuring = time.monotonic()
            baselines(problem, verifier, result.notes)
            deadline.expect_model_verdict(time.monotonic() - measuring)  # a model verdict costs about as much
        graphs = cuda_graphs.wanted(problem, verifier)
        if graphs:  # torch.compile of the model with CUDA graphs: a final model, and what the kernels must beat
            result.notes.append(graphs)
            emit("apply_stage", {"stage": "graphs", "apply_id": apply_id})
            measuring = time.monotonic()
            result.compile_graphs = cuda_graphs.baseline(problem, verifier, out_dir, result.notes, emit)
            deadline.expect_model_verdict(time.monotonic() - measuring)
        graphs_ms = result.compile_graphs.runtime_ms if result.compile_graphs and result.compile_graphs.correct \
            else None
        regions = _optimize(store, apply_id, extraction, prof, apply, proposer, verifier, spec.spec, out_dir, emit,
                            deadline)
        result.regions = regions
        _store(store, result, "running")
        emit("apply_stage", {"stage": "verify", "apply_id": apply_id,
                             "replaced": [r.name for r in regions if r.status == "replaced"]})
        result.end_to_end, result.model_file, result.compiled = settle(
            problem, extraction, regions, verifier, out_dir, result.notes, emit, apply.replace == "faster", deadline,
            graphs=bool(graphs), graphs_ms=graphs_ms)
        result.times = final_times(problem, result.end_to_end, result.compiled and result.compiled.verdict,
                                   verifier, result.notes, keep_kernels=apply.replace == "correct",
                                   graphs=result.compile_graphs)
        result.status = "done"
    except KernelcraftError as exc:  # a model that cannot be captured, regions that cannot be written: one line
        result.error = str(exc)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM, most likely inside a region's run (stored as stopped there)
        _store(store, result, "stopped")
        raise ApplyInterrupted(apply_id) from None
    except BaseException:
        _store(store, result, "stopped")
        raise
    _store(store, result, result.status)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MANIFEST).write_text(json.dumps(result.to_dict(), indent=1))
    return result


def _store(store: Store, result: ApplyOutcome, status: str) -> None:
    store.update_apply(result.apply_id, status, result.to_dict())


# -- profile and cut ----------------------------------------------------------------------------------------------

def _cut(problem: Problem, sizes, device: str, seed: int, exact_fp32: bool, out_dir: Path,
         emit: OnEvent, kept: Profile | None = None, threads: int | None = None) -> tuple[Extraction, Profile]:
    """The model's regions (written as problems) and its profile, under the policy's fp32 math: the verifier times
    PyTorch so (TF32 off for cuDNN and matmuls under the strict policy), and the shares must be of that time. `kept`:
    a stopped apply's profile, used where it names the same regions as this capture (not measured again);
    `threads`: a CPU's intra-op threads while timing, the verifier's worker's (profile.py)."""
    with reference_math(exact_fp32):
        return _cut_at(problem, sizes, device, seed, out_dir, emit, kept, threads)


def _cut_at(problem: Problem, sizes, device: str, seed: int, out_dir: Path,
            emit: OnEvent, kept: Profile | None = None, threads: int | None = None) -> tuple[Extraction, Profile]:
    module = problem.load(sizes=sizes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = module.Model(*module.get_init_inputs()).eval()
        inputs = list(module.get_inputs())
    target = torch.device(device)
    model = model.to(target)
    inputs = [x.to(target) if isinstance(x, torch.Tensor) else x for x in inputs]
    try:
        extraction = extract_model(model, inputs, problem.name.replace("/", "_"))
        write_problems(extraction, out_dir / "regions")
        if kept is not None and kept.shares.keys() == {r.name for r in extraction.regions}:
            prof = kept
        else:
            emit("apply_stage", {"stage": "profile", "regions": len(extraction.regions), "method": extraction.method})
            prof = profile(extraction, model, inputs, target, threads=threads)
        emit("apply_profile", {"model_ms": prof.model_ms, "method": prof.method, "top_ops": prof.top_ops,
                               "regions": [(r.name, r.kind, r.ms, r.share) for r in prof.regions]})
    finally:
        del model, inputs
        if target.type == "cuda":
            torch.cuda.empty_cache()  # the verifier's workers need the device's memory
    return extraction.with_shares(prof.shares), prof


# -- the regions' runs --------------------------------------------------------------------------------------------

def _optimize(store: Store, apply_id: str, extraction: Extraction, prof: Profile, apply: ApplySettings, proposer,
              verifier, spec: RunSpec, out_dir: Path, emit: OnEvent, deadline: Deadline) -> list[RegionOutcome]:
    """Each problem's run (regions that are one problem run once, as the first of them), and every region's outcome:
    another instance of a problem takes its first's kernel and verdict. The runs share what is left of the budget
    (`deadline`); each is cut to what is left when it starts."""
    like = instances(extraction.regions)
    problems = {name: load_problem(out_dir / "regions" / f"{name}.py") for name in dict.fromkeys(like.values())}
    unable = {name: why for name, p in problems.items() if (why := uncovered(proposer, p, spec.run.backend))}
    for_runs = deadline.for_runs_s()
    plans = plan(prof, None if for_runs is None else for_runs / 60.0, apply.min_share, unable, like)
    earlier = {r.problem: r for r in store.runs(apply_id=apply_id)}
    own = prof.shares
    outcomes = {}

    def finished(q: RegionPlan) -> bool:  # a run that finished (a resumed apply's) is its region's, whatever now
        return q.name in earlier and earlier[q.name].status == "done" and not q.like

    for i, p in enumerate(plans):
        left = deadline.for_runs_s()
        if p.worth and left is not None and not finished(p):
            # what is left is split again among the regions not yet run: an early end's time goes to the next
            fund([q for q in plans[i:] if q.worth and not finished(q)], left / 60.0)
        o = RegionOutcome(p.name, p.kind, own.get(p.name, p.share), p.ms, "skipped", p.why, minutes=p.minutes,
                          like=p.like)
        outcomes[p.name] = o
        if p.name in unable and not p.optimize and p.why == unable[p.name]:
            o.status = "not_covered"
        if not p.optimize and not finished(p):
            continue
        if left is not None and left < SMALLEST_RUN_S and not finished(p):
            o.status, o.reason, o.minutes = "skipped", "the budget ran out before its run", None
            continue
        region_problem = problems[p.name]
        emit("apply_region", {"index": i, "total": sum(q.optimize for q in plans), "region": p.name,
                              "share": p.share, "minutes": p.minutes, "instances": len(p.instances) or 1})
        run = _region_run(store, apply_id, region_problem, p, earlier.get(p.name), proposer, verifier, spec, emit)
        o.run_id = run.run_id
        if run.best is None:
            o.status, o.reason = "no_kernel", run.error or (
                f"its run verified {run.counters.evaluated} kernels, none correct"
                + (f" (stopped: {run.stop_reason})" if run.stop_reason else ""))
            continue
        o.result = run.best.result
        o.source = store.candidate_by_id(run.best.candidate).source
        if (o.speedup or 0) > 1.0 or apply.replace == "correct":
            o.status, o.reason = "replaced", ""
        else:
            o.status, o.reason = "slower", f"its best kernel runs at {o.speedup:.2g}x PyTorch's speed"
    for o in outcomes.values():
        if o.like:
            first = outcomes[o.like]
            o.status, o.run_id, o.result, o.source = first.status, first.run_id, first.result, first.source
            o.reason = f"the same problem as {first.name}" + (f": {first.reason}" if first.reason else "")
    return [outcomes[r.name] for r in extraction.regions]


def _region_run(store: Store, apply_id: str, problem: Problem, p: RegionPlan, earlier: RunRecord | None, proposer,
                verifier, spec: RunSpec, emit: OnEvent) -> RunOutcome:
    if earlier is not None and earlier.status == "done":
        return outcome(store, earlier.id)
    if earlier is not None:
        return resume_run(store, earlier.id, proposer, verifier, out_dir=None, on_event=emit)
    region = spec.copy()
    if p.minutes is not None:
        region.run.budget.wall_s = max(p.minutes * 60.0, 1.0)
    return start_run(store, problem, proposer, verifier, region, out_dir=None, apply_id=apply_id, on_event=emit)
