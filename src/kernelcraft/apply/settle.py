"""The apply's end: the model reassembled with its regions' kernels and verified end to end against the model's own
file, in two forms.

- With its kernels (`settle_kernels`, model_new.py): where the reassembled model is wrong, each replaced region (a
  problem's instances together) is verified alone in the model and those that fail are put back to PyTorch; where it
  is slower than the model, the regions that gained least are put back, one at a time, until it is faster or
  nothing is left. Past the deadline nothing is tried again: what is wrong or slow then puts every region back.
- Compiled with its kernels (`settle_compiled`, model_new_compiled.py): the model under torch.compile, each kernel a
  custom op the compiler works around (reassemble.py's compiled form), holding the kernels that beat torch.compile
  of their own region. Verified once: a kernel inside the compiled model is worth only what it gains over the
  code the compiler would write for its region. Where the model is host-bound (cuda_graphs.py) the form replays
  CUDA graphs, and a kernel goes in where it beats torch.compile of its region on the device's time.

`settle` runs both. Where the replaced regions' own speedups predict less for the model than torch.compile of it
gains, the eager form is not verified (it could not be the final model) and the compiled form gets the time; where
both are verified, the eager form's narrowing stops at half of what is left of the budget.

The model's own file, carried unchanged, is the user's code: the verifier's static guards read only the kernels and
the generated wrapper (guards.static_findings' `trusted`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from kernelcraft.apply.budget import Deadline
from kernelcraft.apply.extract import Extraction
from kernelcraft.apply.outcome import COMPILED_FILE, MODEL_FILE, CompiledForm, RegionOutcome
from kernelcraft.apply.plan import amdahl
from kernelcraft.apply.reassemble import Replacement, reassemble
from kernelcraft.candidate import Candidate
from kernelcraft.errors import KernelcraftError
from kernelcraft.problems import Problem
from kernelcraft.result import Result

OnEvent = Callable[[str, dict], None]


def settle(problem: Problem, extraction: Extraction, regions: list[RegionOutcome], verifier, out_dir: Path,
           notes: list[str], emit: OnEvent, faster: bool, deadline: Deadline, graphs: bool = False,
           graphs_ms: float | None = None) -> tuple[Result | None, str | None, CompiledForm | None]:
    """Both forms: the eager one's verdict and file, then the compiled one (`graphs`: replaying CUDA graphs). Where
    the eager form cannot beat torch.compile of the model (`eager_form_cannot_win`; `graphs_ms`: torch.compile's
    time with CUDA graphs, where it was verified) it is not verified; where a compiled form will be, the eager form's
    narrowing stops at half of what is left of the budget, so the compiled one is not starved by it."""
    hopeless = eager_form_cannot_win(problem, regions, verifier, graphs_ms) if faster else None
    if hopeless:
        notes.append(f"the model with its kernels was not verified eager: {hopeless}")
        for r in regions:
            if r.status == "replaced":
                r.status, r.reason = "dropped", "torch.compile of the model is faster than its kernels predict"
    left = deadline.left_s()
    narrowing = deadline.sooner(left / 2) if left is not None and left > 0 and \
        compiled_regions(regions, verifier, faster, graphs) else deadline
    verdict, model_file = settle_kernels(problem, extraction, regions, verifier, out_dir, notes, emit, faster,
                                         narrowing)
    compiled = settle_compiled(problem, extraction, regions, verifier, out_dir, notes, emit, faster, deadline,
                               graphs)
    return verdict, model_file, compiled


def settle_kernels(problem: Problem, extraction: Extraction, regions: list[RegionOutcome], verifier, out_dir: Path,
                   notes: list[str], emit: OnEvent, faster: bool,
                   deadline: Deadline | None = None) -> tuple[Result | None, str | None]:
    """The reassembled model's verdict and file, after putting back to PyTorch what is wrong or slow in it. The
    model's own file, carried unchanged, is the user's code: the verifier's static guards read only the kernels
    and the generated wrapper (guards.static_findings' `trusted`). Past the deadline no region is tried alone
    again: what is wrong or slow then puts every region back."""
    deadline = deadline or Deadline(None)
    by_name = {r.name: r for r in extraction.regions}

    def verify(chosen: list[RegionOutcome]) -> Result:
        text = reassemble(extraction, problem.source, [
            Replacement(by_name[r.name], r.source, by_name[r.like] if r.like else None) for r in chosen])
        (out_dir / MODEL_FILE).write_text(text)
        emit("apply_verify", {"regions": [r.name for r in chosen]})
        return verifier.evaluate(problem, Candidate(text, f"{problem.name} (apply)"))

    def units() -> dict[str, list[RegionOutcome]]:  # a problem's instances go in and out of the model together
        out: dict[str, list[RegionOutcome]] = {}
        for r in chosen:
            out.setdefault(r.like or r.name, []).append(r)
        return out

    chosen = [r for r in regions if r.status == "replaced"]
    if not chosen:
        return None, None
    result = verify(chosen)
    if not result.correct and deadline.over():
        notes.append(f"the reassembled model was judged {result.status}: {result.message[:300]}; the budget was "
                     "spent, so no region was tried alone in the model")
        for r in list(chosen):
            _drop(r, chosen, "the reassembled model was not correct, and the budget was spent", wrong=True)
    elif not result.correct:
        notes.append(f"the reassembled model was judged {result.status}: {result.message[:300]}; each region "
                     "(a problem's instances together) verified alone in the model")
        for unit in units().values():
            alone = verify(unit)
            if not alone.correct:
                for r in unit:
                    _drop(r, chosen, f"in the model, judged {alone.status}: {alone.message[:200]}", wrong=True)
        result = verify(chosen) if chosen else None

    def slower() -> bool:
        return bool(faster and chosen and result is not None and result.correct and (result.speedup_eager or 0) < 1.0)

    while slower() and not deadline.over():
        weakest = min(units().values(), key=lambda unit: unit[0].speedup or 0)
        names = ", ".join(r.name for r in weakest)
        notes.append(f"the reassembled model was {result.speedup_eager:.2f}x the model's time; {names} put back to "
                     "PyTorch")
        for r in weakest:
            _drop(r, chosen, "the model was faster end to end without it")
        result = verify(chosen) if chosen else None
    if slower():  # the budget was spent before a faster set was found
        notes.append(f"the reassembled model was {result.speedup_eager:.2f}x the model's time and the budget was "
                     "spent: every region put back to PyTorch")
        for r in list(chosen):
            _drop(r, chosen, "the model was faster end to end without the kernels, and the budget was spent")
        result = None
    if result is None or not result.correct:
        for r in list(chosen):
            _drop(r, chosen, "the reassembled model was not correct", wrong=True)
        (out_dir / MODEL_FILE).unlink(missing_ok=True)
        return result, None
    return result, str(out_dir / MODEL_FILE)


def _drop(region: RegionOutcome, chosen: list[RegionOutcome], why: str, wrong: bool = False) -> None:
    region.status, region.reason = "dropped", why
    region.wrong_in_model = region.wrong_in_model or wrong
    if region in chosen:
        chosen.remove(region)


def eager_form_cannot_win(problem: Problem, regions: list[RegionOutcome], verifier,
                          graphs_ms: float | None = None) -> str | None:
    """Why the model with its kernels, eager, cannot be the final model (`cannot_beat_compile`: against torch.compile
    of the model, or its time with CUDA graphs, `graphs_ms`, where faster), or None; None too where torch.compile of
    the model is not timed."""
    replaced = [r for r in regions if r.status == "replaced" and r.speedup]
    if not replaced or not verifier.config.compile_baseline:
        return None
    try:
        target = verifier.target(problem)
    except KernelcraftError:
        return None
    if target.eager is None or target.compiled is None:
        return None
    return cannot_beat_compile(target.eager.cost_ms, min(target.compiled.cost_ms, graphs_ms or float("inf")),
                               {r.name: r.share for r in regions}, {r.name: r.speedup for r in replaced})


def cannot_beat_compile(eager_ms: float, compile_ms: float, shares: dict[str, float],
                        speedups: dict[str, float]) -> str | None:
    """Where torch.compile of the model is faster than eager by more than the replaced regions' own speedups predict
    for the model (Amdahl over their shares; a region's speedup alone is seldom smaller than in the model), why the
    eager form's verdict would be spent on a model torch.compile beats; else None."""
    needed = eager_ms / compile_ms
    predicted = amdahl(shares, speedups)
    if predicted >= needed:
        return None
    return (f"its kernels predict {predicted:.2f}x the model's eager time, and torch.compile of the model is "
            f"{needed:.2f}x: the model with its kernels, eager, cannot beat torch.compile's")


def compiled_regions(regions: list[RegionOutcome], verifier, faster: bool = True,
                     graphs: bool = False) -> list[RegionOutcome]:
    """The regions whose kernels go into the compiled model: those that beat torch.compile of their region
    (`graphs`: on the device's time, as a replay costs the host nothing a kernel; `faster=False`: every correct one),
    not put back for being wrong in the model; none where the verifier does not time torch.compile (the form is there
    to beat it)."""
    if not verifier.config.compile_baseline:
        return []
    gain = device_gain_compile if graphs else (lambda r: r.speedup_compile or 0)
    return [r for r in regions if r.result is not None and r.result.correct and not r.wrong_in_model
            and r.status in ("replaced", "dropped", "slower") and (not faster or gain(r) > 1.0)]


def device_gain_compile(region: RegionOutcome) -> float:
    """Its kernel's speed over torch.compile of its region on the device's time (the work queued ahead: no host time
    in it), or over its cost where either device time was not measured; 0 where torch.compile was not timed."""
    result = region.result
    if result is None or result.runtime is None or result.compiled is None:
        return 0.0
    if result.runtime.device_ms and result.compiled.device_ms:
        return result.compiled.device_ms / result.runtime.device_ms
    return region.speedup_compile or 0.0


def settle_compiled(problem: Problem, extraction: Extraction, regions: list[RegionOutcome], verifier, out_dir: Path,
                    notes: list[str], emit: OnEvent, faster: bool = True,
                    deadline: Deadline | None = None, graphs: bool = False) -> CompiledForm | None:
    """The model compiled with the kernels that beat torch.compile of their region (a problem's instances together;
    `faster=False`: every correct kernel the model was correct with; `graphs`: replaying CUDA graphs, the kernels
    chosen on the device's time), verified end to end; None where there are none, or where the verifier does not
    time torch.compile (the form is there to beat it). Past the deadline it is not verified (the form says which
    kernels it would have held)."""
    chosen = compiled_regions(regions, verifier, faster, graphs)
    if not chosen:
        return None
    deadline = deadline or Deadline(None)
    by_name = {r.name: r for r in extraction.regions}
    form = CompiledForm([r.name for r in chosen], graphs=graphs)
    if deadline.over():
        notes.append(f"{len(chosen)} region(s) beat torch.compile of their region, but the budget was spent before "
                     "the compiled model with their kernels was verified")
        return form
    text = reassemble(extraction, problem.source, [
        Replacement(by_name[r.name], r.source, by_name[r.like] if r.like else None) for r in chosen], compiled=True,
        graphs=graphs)
    path = out_dir / COMPILED_FILE
    path.write_text(text)
    emit("apply_verify", {"regions": form.regions, "compiled": True, "graphs": graphs})
    form.verdict = verifier.evaluate(problem, Candidate(
        text, f"{problem.name} (apply, compiled{', CUDA graphs' if graphs else ''})", compiles=True,
        attribute=not graphs))
    if form.verdict.correct:
        form.file = str(path)
    else:
        notes.append(f"the compiled model with its kernels was judged {form.verdict.status}: "
                     f"{form.verdict.message[:300]}")
        path.unlink(missing_ok=True)
    return form
