"""The model's times an apply reports, one method for all (the verifier's): eager, torch.compile of the model as it
was, with its kernels where they went in; and the final model, the fastest of those, so that apply never gives
back a model slower than torch.compile's (swap.py follows `final`)."""

from __future__ import annotations

from kernelcraft.errors import KernelcraftError
from kernelcraft.problems import Problem
from kernelcraft.result import Result

FINAL_KERNELS, FINAL_AS_IT_WAS, FINAL_COMPILE = "with kernels", "as it was", "torch.compile"  # times["final"]


def baselines(problem: Problem, verifier, notes: list[str]) -> None:
    """The model's own baselines (eager, torch.compile), measured once and kept by the verifier for the end."""
    try:
        verifier.target(problem)
    except KernelcraftError as exc:
        notes.append(f"the model's own times were not taken: {exc}")


def final_times(problem: Problem, verdict: Result | None, verifier, notes: list[str]) -> dict | None:
    """The model's eager and torch.compile times and the final model's, one method for the three: the end-to-end
    verdict's where the kernels went in, else the verifier's baselines of the model (its target). The final model is
    the fastest of the model as it was, the model with its kernels and torch.compile of the model as it was: apply
    never gives back a model slower than torch.compile's (swap.py follows `final`)."""
    if verdict is not None and verdict.correct and verdict.runtime_ms:
        times = {"eager_ms": verdict.eager_ms, "compile_ms": verdict.compile_ms, "kernels_ms": verdict.runtime_ms,
                 "final_ms": verdict.runtime_ms, "final": FINAL_KERNELS, "method": verdict.timing_method}
    else:
        try:
            target = verifier.target(problem)
        except KernelcraftError as exc:
            notes.append(f"the model's own times were not taken: {exc}")
            return None
        if target.eager is None:
            return None
        times = {"eager_ms": target.eager.cost_ms, "compile_ms": target.compiled.cost_ms if target.compiled else None,
                 "kernels_ms": None, "final_ms": target.eager.cost_ms, "final": FINAL_AS_IT_WAS,
                 "method": target.eager.method}
    if times["compile_ms"] and times["final_ms"] > times["compile_ms"]:
        notes.append(f"torch.compile of the model as it was runs in {times['compile_ms']:.4g} ms, faster than "
                     f"{'its kernels' if times['final'] == FINAL_KERNELS else 'the model as it was'} "
                     f"({times['final_ms']:.4g} ms): the model given back is torch.compile(model)")
        times["final_ms"], times["final"] = times["compile_ms"], FINAL_COMPILE
    return times
