"""The model's times an apply reports, one method for all (the verifier's): eager, torch.compile of the model as it
was (and with CUDA graphs, where the model is host-bound: cuda_graphs.py), with its kernels where they went in,
compiled with its kernels (where a kernel beat torch.compile of its region); and the final model, the fastest of
those, so that apply never gives back a model slower than torch.compile's (swap.py follows `final`)."""

from __future__ import annotations

from kernelcraft.errors import KernelcraftError
from kernelcraft.problems import Problem
from kernelcraft.result import Result, Timing

# times["final"]: which model apply gives back
FINAL_KERNELS, FINAL_COMPILED_KERNELS = "with kernels", "compiled with kernels"
FINAL_AS_IT_WAS, FINAL_COMPILE = "as it was", "torch.compile"
FINAL_COMPILE_GRAPHS = "torch.compile, CUDA graphs"  # mode="reduce-overhead"


def baselines(problem: Problem, verifier, notes: list[str]) -> None:
    """The model's own baselines (eager, torch.compile), measured once and kept by the verifier for the end."""
    try:
        verifier.target(problem)
    except KernelcraftError as exc:
        notes.append(f"the model's own times were not taken: {exc}")


def final_times(problem: Problem, verdict: Result | None, compiled: Result | None, verifier,
                notes: list[str], keep_kernels: bool = False, graphs: Result | None = None) -> dict | None:
    """The model's eager and torch.compile times and the final model's, one method for all: the end-to-end
    verdicts' where kernels went in, else the verifier's baselines of the model (its target). The final model is
    the fastest of torch.compile of the model as it was, with CUDA graphs too (`graphs`, where verified), and the
    model with its kernels, eager (`verdict`) and compiled (`compiled`), where those were verified correct, and the
    model as it was (`keep_kernels`: not where kernels went in, replace="correct", which asks for the kernels in the
    model)."""
    graphs = graphs if graphs is not None and graphs.correct and graphs.runtime_ms else None
    forms = {name: v for name, v in ((FINAL_KERNELS, verdict), (FINAL_COMPILED_KERNELS, compiled))
             if v is not None and v.correct and v.runtime_ms}
    if forms or graphs:
        any_verdict = next(iter(forms.values())) if forms else graphs
        times = {"eager_ms": any_verdict.eager_ms, "compile_ms": any_verdict.compile_ms,
                 "method": any_verdict.timing_method}
        timings = (any_verdict.eager, any_verdict.compiled)
    else:
        try:
            target = verifier.target(problem)
        except KernelcraftError as exc:
            notes.append(f"the model's own times were not taken: {exc}")
            return None
        if target.eager is None:
            return None
        times = {"eager_ms": target.eager.cost_ms, "compile_ms": target.compiled.cost_ms if target.compiled else None,
                 "method": target.eager.method}
        timings = (target.eager, target.compiled)
    notes.extend(host_bound(*timings, verifier.config.compile_baseline))
    times["kernels_ms"] = forms[FINAL_KERNELS].runtime_ms if FINAL_KERNELS in forms else None
    times["compiled_kernels_ms"] = forms[FINAL_COMPILED_KERNELS].runtime_ms if FINAL_COMPILED_KERNELS in forms else None
    times["compile_graphs_ms"] = graphs.runtime_ms if graphs else None
    if not verifier.config.compile_baseline:  # not asked for: no time the verifier kept from another run is shown
        times["compile_ms"] = None
    times["final"], times["final_ms"] = final_of(times["eager_ms"], times["compile_ms"],
                                                 {name: v.runtime_ms for name, v in forms.items()}, keep_kernels,
                                                 times["compile_graphs_ms"])
    if times["final"] in (FINAL_COMPILE, FINAL_COMPILE_GRAPHS):
        beaten = [f"{name} ({ms:.4g} ms)" for name, ms in
                  [(FINAL_KERNELS, times["kernels_ms"]), (FINAL_COMPILED_KERNELS, times["compiled_kernels_ms"])] if ms]
        if not beaten:
            beaten = [f"the model as it was ({times['eager_ms']:.4g} ms)"]
        if times["final"] == FINAL_COMPILE_GRAPHS:
            if times["compile_ms"]:
                beaten.append(f"torch.compile without them ({times['compile_ms']:.4g} ms)")
            notes.append(f"torch.compile of the model as it was, with CUDA graphs, runs in {times['final_ms']:.4g} ms, "
                         f"faster than {', '.join(beaten)}: the model given back is "
                         "torch.compile(model, mode=\"reduce-overhead\")")
        else:
            notes.append(f"torch.compile of the model as it was runs in {times['compile_ms']:.4g} ms, faster than "
                         f"{', '.join(beaten)}: the model given back is torch.compile(model)")
    return times


HOST_BOUND = 1.25  # a model whose call takes this much longer on the host than its work on the device


def host_bound(eager: Timing | None, compiled: Timing | None, compiled_timed: bool = True) -> list[str]:
    """A note for the model eager and under torch.compile where its call holds more host time than device time (the
    Python and launches of its ops outlast their work): a kernel that cuts the device's time does not move it."""
    notes = []
    for label, t in (("eager", eager), ("under torch.compile", compiled if compiled_timed else None)):
        if t is not None and t.host_ms and t.device_ms and t.host_ms > HOST_BOUND * t.device_ms:
            notes.append(f"the model is host-bound {label}: a call takes {t.host_ms:.4g} ms on the host and "
                         f"{t.device_ms:.4g} ms on the device (its work queued ahead); its time is the host's, "
                         "which faster kernels do not cut (each kernel's own launches add to it); fewer launches do")
    return notes


def final_of(eager_ms: float, compile_ms: float | None, forms: dict[str, float],
             keep_kernels: bool = False, graphs_ms: float | None = None) -> tuple[str, float]:
    """The final model and its time: the fastest of the model as it was, torch.compile's (where timed; and with CUDA
    graphs, `graphs_ms`, where verified) and the forms with kernels (`forms`: FINAL_KERNELS, FINAL_COMPILED_KERNELS ->
    ms); `keep_kernels`: where there are forms, the model as it was is no choice."""
    options = {**forms, FINAL_COMPILE: compile_ms, FINAL_COMPILE_GRAPHS: graphs_ms}
    if not (forms and keep_kernels):
        options[FINAL_AS_IT_WAS] = eager_ms
    ms, name = min((ms, name) for name, ms in options.items() if ms)
    return name, ms
