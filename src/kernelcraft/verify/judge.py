"""The trusted checks of one evaluation, run by the supervisor against a worker.

Each function takes the evaluation's context (`Case`), asks the worker for something, judges what
comes back, and records findings on the result as named reasons. Order of an evaluation:
`trials` (correctness on fresh secret inputs) → `determinism` → `attribution` (which kernels ran) →
`timing` (with a re-check of the timed outputs) → `clock_cross_check` → `review`.
"""

from __future__ import annotations

from dataclasses import dataclass

import time

import psutil
import torch

from kernelcraft import hardware
from kernelcraft.verify.check import check_form, compare
from kernelcraft.verify.inputs import distributions_for, draw_inputs, fresh_seed
from kernelcraft.verify.policy import Policy, reference_math
from kernelcraft.verify.result import Result


@dataclass
class Case:
    worker: object  # process.WorkerProcess
    ref: object  # supervisor._Reference
    result: Result
    policy: Policy
    device: torch.device
    config: object  # supervisor.VerifyConfig
    l2_bytes: int
    spec: hardware.DeviceSpec | None

    def reference_outputs(self, inputs: list) -> list:
        with torch.no_grad(), reference_math(not self.policy.allow_tf32):
            out = self.ref.model(*inputs)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def run(self, inputs: list) -> list | None:
        """Lend `inputs` to the worker for one call; its outputs, or None after recording why not."""
        poison = [(s.shape, s.dtype) for s in self.ref.cost.outputs]
        reply = self.worker.ask({"op": "run", "inputs": inputs, "poison": poison}, self.config.run_timeout)
        if "error" in reply:
            self.result.fail("runtime_error", "candidate_raised", reply.get("traceback") or reply["error"])
            return None
        if "not_tensor" in reply:
            self.result.fail("incorrect", "output_not_tensor", "outputs must be plain torch.Tensor objects; got "
                             + ", ".join(reply["not_tensor"]))
            return None
        if "aliases" in reply:
            self.result.fail("rejected", "output_aliases_input", f"output(s) {reply['aliases']} share memory with an input")
            return None
        if children_alive(self.worker):
            self.result.fail("rejected", "background_process",
                             "the candidate left processes running after its call returned")
            return None
        return reply["outputs"]

    def judge(self, outputs: list, expected: list, label: str) -> bool:
        form = check_form(outputs, expected, self.device)
        if form:
            self.result.fail("incorrect", form[0], f"{label}: {form[1]}")
            return False
        worst = 0.0
        for i, (out, ref) in enumerate(zip(outputs, expected)):
            cmp = compare(out, ref, self.policy)
            worst = max(worst, cmp.max_rel_error)
            if not cmp.ok:
                self.result.max_rel_error = max(self.result.max_rel_error or 0.0, cmp.max_rel_error)
                self.result.fail("incorrect", cmp.reason, f"{label}, output {i}: {cmp.detail}")
                return False
        self.result.max_rel_error = max(self.result.max_rel_error or 0.0, worst)
        self.result.trial_errors.append({"trial": label, "max_rel_error": worst})
        return True


def children_alive(worker) -> bool:
    try:
        return bool(psutil.Process(worker.proc.pid).children(recursive=True))
    except psutil.Error:
        return False


def _clone(inputs: list) -> list:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def trials(case: Case) -> bool:
    """Correctness on fresh secret inputs, one distribution per trial; then the same inputs twice."""
    result, distributions = case.result, distributions_for(case.ref.module)
    first: tuple[list, list] | None = None
    for trial in range(case.config.trials):
        seed, dist = fresh_seed(), distributions[trial % len(distributions)]
        result.seeds.append(seed)
        inputs = draw_inputs(case.ref.module, str(case.device), seed, dist)
        private = _clone(inputs)
        outputs = case.run(inputs)
        if outputs is None:
            return False
        for i, (x, p) in enumerate(zip(inputs, private)):
            if isinstance(x, torch.Tensor) and not torch.equal(x, p) and not _equal_nan(x, p):
                result.fail("rejected", "inputs_modified", f"input {i} was changed by the candidate")
                return False
        expected = case.reference_outputs(private)
        if not all(torch.isfinite(e).all() for e in expected if e.is_floating_point()):
            result.notes.append(f"trial {trial}: the reference is not finite under '{dist}' inputs; skipped")
            continue
        if not case.judge(outputs, expected, f"trial {trial} ({dist})"):
            return False
        result.trials += 1
        if first is None:
            first = (private, outputs)
    if result.trials == 0:
        result.fail("runtime_error", "reference_not_finite", "no trial had a finite reference output")
        return False
    return determinism(case, *first) if case.config.determinism else True


def determinism(case: Case, inputs: list, outputs: list) -> bool:
    """The same inputs again must give the same outputs: within a tenth of the tolerance."""
    again = case.run(_clone(inputs))
    if again is None:
        return False
    tight = Policy(f"{case.policy.name}/10", case.policy.fp32 / 10, case.policy.half / 10, False, "")
    for i, (a, b) in enumerate(zip(again, outputs)):
        if type(a) is not torch.Tensor or a.shape != b.shape or a.dtype != b.dtype:
            case.result.fail("rejected", "nondeterministic", f"output {i} changed form between identical calls")
            return False
        cmp = compare(a, b, tight)
        if not cmp.ok:
            case.result.fail("rejected", "nondeterministic", f"output {i} differs between two calls on identical "
                             f"inputs by {cmp.max_rel_error:.3g} (more than {tight.fp32:g}): it reads memory "
                             "nothing wrote, races, or draws random numbers")
            return False
    return True


def attribution(case: Case, allow_library: bool) -> bool:
    """Which kernels ran: the candidate's own, library ones, and on which streams."""
    inputs = draw_inputs(case.ref.module, str(case.device), fresh_seed())
    reply = case.worker.ask({"op": "profile", "inputs": inputs}, case.config.run_timeout * 2)
    if "error" in reply:
        case.result.fail("runtime_error", "candidate_raised", reply.get("traceback") or reply["error"])
        return False
    info = reply["attribution"]
    if info is None:
        case.result.notes.append(reply.get("note", "kernel attribution is not available here"))
        return True
    case.result.kernels = info["kernels"]
    case.result.custom_kernel_fraction = info["custom_fraction"]
    finding = attribution_finding(info, allow_library)
    if finding:
        case.result.fail("rejected", *finding)
        return False
    return True


def attribution_finding(info: dict, allow_library: bool) -> tuple[str, str] | None:
    """(reason, message) for what an attribution (Attribution.to_dict()) shows wrong, else None."""
    library = [k["name"] for k in info["kernels"] if not k["custom"]]
    if not any(k["custom"] for k in info["kernels"]):
        return "no_custom_kernel", "none of the candidate's own kernels ran" + (
            f"; what ran: {', '.join(library[:5])}" if library else "")
    if library and not allow_library:
        return "library_kernels", f"library kernels ran beside the candidate's: {', '.join(library[:5])}"
    side = [s for s in info["streams"] if s != info["timing_stream"]]
    if info["timing_stream"] >= 0 and side:
        return "side_stream", f"kernels ran on stream(s) {side}, not on the timing stream"
    return None


def timing(case: Case, seed: int) -> dict | None:
    """Time the candidate interleaved with the eager reference; re-check the timed outputs."""
    t = case.config.timing
    reply = case.worker.ask({"op": "time", "seed": seed, "names": ["candidate", "eager"], "config": t,
                             "l2_bytes": case.l2_bytes}, t.budget_s * 4 + case.config.run_timeout * 2)
    result = case.result
    if "error" in reply:
        if reply.get("reason") == "output_not_tensor":
            result.fail("incorrect", "output_not_tensor", reply["error"])
        else:
            result.fail("runtime_error", "candidate_raised", reply.get("traceback") or reply["error"])
        return None
    result.runtime = reply["timings"]["candidate"]
    result.eager_control = reply["timings"]["eager"]
    # The outputs of the last timed round must be right too: a candidate that behaves while checked
    # and cuts corners while timed is caught here.
    expected = case.reference_outputs(draw_inputs(case.ref.module, str(case.device), seed + reply["last_round"]))
    if not case.judge(reply["outputs"], expected, "timed round"):
        result.reasons[-1:] = ["timing_output_mismatch"]
        return None
    if reply["event_ms"] > reply["wall_ms"] * 1.05 + 1.0:
        result.fail("rejected", "timing_mismatch", f"events summed {reply['event_ms']:.2f} ms inside "
                    f"{reply['wall_ms']:.2f} ms of synchronised wall time")
        return None
    return reply


def clock_cross_check(case: Case) -> bool:
    """The supervisor's own clock: K back-to-back calls and a device-wide sync, timed from outside.

    The events and statistics live in the candidate's process; this clock does not. Work hidden from
    the events (a side stream, a patched timer) shows here as calls slower than the events said.
    """
    median = case.result.runtime.median_ms
    k = max(3, min(1000, int(100.0 / max(median, 1e-3))))
    inputs = draw_inputs(case.ref.module, str(case.device), fresh_seed())
    timeout = case.config.run_timeout + k * median / 1e3 * 20
    # Back-to-back calls skip the L2 flush and overlap launch latency, so they may only be faster;
    # slower by more than half the median, a launch's worth of host time and 25 ms of host jitter
    # over the whole spin is work the events missed. A miss is measured again (jitter does not repeat).
    # CPU timings share two cores with everything else on a small machine: a wider margin there.
    if case.device.type == "cuda":
        limit_ms = 1.5 * median + 0.05 + 25.0 / k
    else:
        limit_ms = 3.0 * median + 0.5 + 100.0 / k
    per_call_ms = float("inf")
    for _attempt in range(3):
        start = time.perf_counter()
        reply = case.worker.ask({"op": "spin", "inputs": inputs, "calls": 0}, timeout)
        empty = time.perf_counter() - start
        start = time.perf_counter()
        reply = case.worker.ask({"op": "spin", "inputs": inputs, "calls": k}, timeout)
        full = time.perf_counter() - start
        if "error" in reply:
            case.result.fail("runtime_error", "candidate_raised", reply.get("traceback") or reply["error"])
            return False
        per_call_ms = min(per_call_ms, max(full - empty, 0.0) / k * 1e3)
        if per_call_ms <= limit_ms:
            break
    case.result.notes.append(f"trusted clock: {per_call_ms:.4g} ms per call over {k} back-to-back calls")
    if per_call_ms > limit_ms:
        case.result.fail("rejected", "timing_mismatch", f"the supervisor's clock saw {per_call_ms:.4g} ms per call, "
                         f"the candidate's events {median:.4g} ms")
        return False
    return True


def review(case: Case, sanity_bound: float) -> None:
    """Speedups beyond the sanity bound or faster than the roofline are flagged, never silently trusted."""
    result = case.result
    if result.speedup_eager is not None and result.speedup_eager > sanity_bound:
        result.flag("speedup_review", f"{result.speedup_eager:.1f}x over eager is beyond the sanity bound of "
                    f"{sanity_bound:g}x: check the reference is not doing needless work before trusting it")
    if result.roofline_fraction is not None and result.roofline_fraction > 1.05:
        result.flag("speedup_review", f"{result.roofline_fraction:.2f}x the roofline floor: faster than the "
                    "device can be; the measurement or the problem's cost is wrong")


def _equal_nan(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.is_floating_point() and a.shape == b.shape and bool(torch.equal(a.nan_to_num(0.5), b.nan_to_num(0.5)))
