"""The trusted checks of one evaluation, run by the supervisor against a worker.

Each function takes the evaluation's context (`Case`), asks the worker for something, judges what
comes back, and records findings on the result as named reasons. Order of an evaluation:
`trials` (correctness on fresh secret inputs, the first one run twice for determinism) →
`attribution` (which kernels ran) → `timing` (inputs changed in place between calls; sampled timed
outputs re-checked) → `clock_cross_check` → `review`.

Memory: a trial holds its inputs (no private copy: a keyed fingerprint proves them unchanged), the
reference's outputs and the candidate's, and lets them go before the next trial is drawn.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch

from kernelcraft import hardware
from kernelcraft.result import Result
from kernelcraft.verify.check import Comparison, check_form, compare, compare_exact
from kernelcraft.verify.config import VerifyConfig
from kernelcraft.verify.containment import descendants
from kernelcraft.verify.inputs import distributions_for, draw_inputs, fresh_seed, mutate_inputs, mutation_kind
from kernelcraft.verify.memory import GiB, fingerprint, new_key, release_cache
from kernelcraft.verify.policy import Policy, reference_math


class HarnessFault(Exception):
    """The harness itself failed (e.g. out of memory in its own code): the verifier's error, not the candidate's."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


@dataclass
class Case:
    worker: object  # process.WorkerProcess
    ref: object  # supervisor._Reference
    result: Result
    policy: Policy
    device: torch.device
    config: VerifyConfig
    l2_bytes: int
    spec: hardware.DeviceSpec | None

    def reference_outputs(self, inputs: list) -> list:
        with torch.no_grad(), reference_math(not self.policy.allow_tf32):
            out = self.ref.model(*inputs)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def exact_outputs(self, inputs: list) -> list | None:
        """The reference in float64 (a copy of the model, the inputs widened), or None, noted, where it
        cannot be had: an op without float64, or not enough free memory for it."""
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
            free, _ = torch.cuda.mem_get_info(self.device)
            needed = 4 * self.ref.cost.peak_bytes  # float64 of fp32 work is twice as wide; fp16 four times
            if needed > free:
                self.result.notes.append(f"float64 reference skipped: it needs ~{needed / GiB:.1f} GiB, "
                                         f"{free / GiB:.1f} GiB are free")
                return None
        try:
            model = copy.deepcopy(self.ref.model).double()
            wide = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            with torch.no_grad():
                out = model(*wide)
            return list(out) if isinstance(out, (tuple, list)) else [out]
        except (RuntimeError, TypeError, NotImplementedError) as exc:
            self.result.notes.append(f"float64 reference unavailable: {type(exc).__name__}: {str(exc)[:200]}")
            return None

    def _raised(self, reply: dict) -> None:
        """Record an error reply: the harness's out-of-memory is raised as the verifier's own fault."""
        memory = reply.get("memory") or {}
        state = (f" (the device had {memory['free'] / GiB:.2f} GiB free of {memory['total'] / GiB:.1f}; the worker "
                 f"held {memory['worker_reserved'] / GiB:.2f} GiB)") if memory else ""
        if reply.get("oom") == "harness":
            raise HarnessFault("harness_oom", f"out of memory in the harness's own code, not the candidate's: "
                               f"{reply['error'].splitlines()[0]}{state}")
        if reply.get("oom") == "candidate":
            self.result.fail("runtime_error", "candidate_oom", f"out of memory while the candidate's own code "
                             f"allocated{state}:\n{reply.get('traceback') or reply['error']}")
        elif reply.get("reason") == "output_not_tensor":
            self.result.fail("incorrect", "output_not_tensor", reply["error"])
        else:
            self.result.fail("runtime_error", "candidate_raised", reply.get("traceback") or reply["error"])

    def run(self, inputs: list) -> list | None:
        """Lend `inputs` to the worker for one call; its outputs, or None after recording why not."""
        poison = [(s.shape, s.dtype) for s in self.ref.cost.outputs]
        reply = self.worker.ask({"op": "run", "inputs": inputs, "poison": poison}, self.config.run_timeout)
        if "error" in reply:
            self._raised(reply)
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

    def judge(self, outputs: list, expected: list, label: str, inputs: list | None = None) -> bool:
        """Compare outputs with the reference's; where one fails on values alone and the inputs are given,
        judge it again against float64 (an ill-conditioned output is torch's rounding, not the candidate's)."""
        form = check_form(outputs, expected, self.device)
        if form:
            self.result.fail("incorrect", form[0], f"{label}: {form[1]}")
            return False
        worst, exact = 0.0, None
        for i, (out, ref) in enumerate(zip(outputs, expected)):
            cmp = compare(out, ref, self.policy)
            if not cmp.ok and cmp.reason == "mismatch" and inputs is not None and out.is_floating_point():
                exact = exact if exact is not None else (self.exact_outputs(inputs) or [])
                if i < len(exact) and exact[i].shape == out.shape:
                    cmp = self._against_exact(out, ref, exact[i], cmp, f"{label}, output {i}")
            worst = max(worst, cmp.max_rel_error)
            if not cmp.ok:
                self.result.max_rel_error = max(self.result.max_rel_error or 0.0, cmp.max_rel_error)
                self.result.fail("incorrect", cmp.reason, f"{label}, output {i}: {cmp.detail}")
                return False
        self.result.max_rel_error = max(self.result.max_rel_error or 0.0, worst)
        self.result.trial_errors.append({"trial": label, "max_rel_error": worst})
        return True

    def _against_exact(self, out, ref, exact, first: Comparison, label: str) -> Comparison:
        second = compare_exact(out, ref, exact, self.policy)
        if second.ok:
            self.result.notes.append(f"{label}: judged against float64, as torch's own output is not within the "
                                     f"tolerance of it there; {second.detail}")
            return second
        # Still wrong: say it in the first comparison's terms, with the float64 figures beside them.
        return Comparison(False, first.max_rel_error, "mismatch", f"{first.detail}; {second.detail}")

    def release(self) -> None:
        """Hand the supervisor's cached device blocks back (beyond what it may keep), so the worker can have them."""
        release_cache(self.device)


def children_alive(worker) -> bool:
    return bool(descendants(worker.proc.pid))


def _finite(expected: list) -> bool:
    flags = [torch.isfinite(e).all() for e in expected if e.is_floating_point()]
    return not flags or bool(torch.stack(flags).all())  # one read for every output


def trials(case: Case) -> bool:
    """Correctness on fresh secret inputs, one distribution per trial; the first trial's inputs twice."""
    result, distributions = case.result, distributions_for(case.ref.module)
    checked_twice = not case.config.determinism
    try:
        for trial in range(case.config.trials):
            seed, dist = fresh_seed(), distributions[trial % len(distributions)]
            result.seeds.append(seed)
            inputs = outputs = expected = None  # the last trial's go before this one's are drawn
            inputs = draw_inputs(case.ref.module, str(case.device), seed, dist)
            key = new_key()
            before = fingerprint(inputs, key)
            outputs = case.run(inputs)
            if outputs is None:
                return False
            expected = case.reference_outputs(inputs)
            # after the reference too: a change made while it ran would have made it wrong
            changed = [i for i, (a, b) in enumerate(zip(fingerprint(inputs, key), before)) if a != b]
            if changed:
                result.fail("rejected", "inputs_modified", f"input {changed[0]} was changed by the candidate")
                return False
            if not _finite(expected):
                result.notes.append(f"trial {trial}: the reference is not finite under '{dist}' inputs; skipped")
                continue
            if not case.judge(outputs, expected, f"trial {trial} ({dist})", inputs):
                return False
            result.trials += 1
            expected = None
            if not checked_twice:
                checked_twice = True
                if not determinism(case, inputs, outputs):
                    return False
    finally:
        case.release()
    if result.trials == 0:
        result.fail("runtime_error", "reference_not_finite", "no trial had a finite reference output")
        return False
    return True


def determinism(case: Case, inputs: list, outputs: list) -> bool:
    """The same inputs again must give the same outputs: within a tenth of the tolerance."""
    again = case.run(inputs)
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
        case._raised(reply)
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
    # The candidate's own kernels must run on the timing stream. Library kernels may not: PyTorch forks its
    # own streams for some ops (a grouped 3D transposed convolution runs on four, in the reference too) and
    # joins them before returning; work hidden that way still shows in the supervisor's clock check, and a
    # stream the candidate creates itself is refused by the static check.
    side = sorted({s for k in info["kernels"] if k["custom"] for s in k.get("streams") or []}
                  - {info["timing_stream"]})
    if info["timing_stream"] >= 0 and side:
        return "side_stream", f"the candidate's kernels ran on stream(s) {side}, not on the timing stream"
    return None


def timing(case: Case, seed: int) -> dict | None:
    """Time the candidate interleaved with the eager reference, the inputs changed in place between calls;
    then check the sampled timed calls' outputs against the reference on the inputs as they were then."""
    t = case.config.timing
    # Each kept sample holds one output in the worker: three where that is small, else one.
    out_bytes = case.ref.cost.output_bytes
    keep = 3 if 3 * out_bytes <= GiB else 1
    reply = case.worker.ask({"op": "time", "seed": seed, "names": ["candidate", "eager"], "config": t,
                             "l2_bytes": case.l2_bytes, "keep": keep}, t.budget_s * 4 + case.config.run_timeout * 2)
    result = case.result
    if "error" in reply:
        case._raised(reply)
        return None
    result.runtime = reply["timings"]["candidate"]
    result.eager_control = reply["timings"]["eager"]
    result.memory["worker_peak_reserved"] = (reply.get("memory") or {}).get("worker_peak_reserved")
    if not _timed_samples(case, seed, reply):
        return None
    if reply["event_ms"] > reply["wall_ms"] * 1.05 + 1.0:
        result.fail("rejected", "timing_mismatch", f"events summed {reply['event_ms']:.2f} ms inside "
                    f"{reply['wall_ms']:.2f} ms of synchronised wall time")
        return None
    return reply


def _timed_samples(case: Case, seed: int, reply: dict) -> bool:
    """Each sampled timed call against the reference on its inputs: the round's, changed as the worker
    changed them up to that call. A candidate that behaves while checked and cuts corners while timed
    fails here (`timing_output_mismatch`); one that hands back an output it kept while its inputs changed
    (right when called afresh on the same values) fails as `memoized_output`. The call sampled from the
    device-only timing (host's work queued ahead) is checked last: a candidate wrong only there told those
    calls apart (`timing_output_mismatch`), whatever a fresh call gives."""
    result, module = case.result, case.ref.module
    kind = mutation_kind(module)
    changes = any(spec.dtype.is_floating_point for spec in case.ref.cost.inputs)  # something to change
    try:
        for sample in sorted(reply["samples"], key=lambda s: bool(s.get("device_only"))):
            inputs = expected = None  # the last sample's go before this one's are drawn
            inputs = draw_inputs(module, str(case.device), seed + sample["round"])
            for mutation in sample["mutations"]:
                mutate_inputs(inputs, mutation, kind)
            expected = case.reference_outputs(inputs)
            label = (f"{'device-only ' if sample.get('device_only') else ''}timed call (round {sample['round']}, "
                     f"inputs changed {len(sample['mutations'])}x in place)")
            if not _finite(expected):
                result.notes.append(f"{label}: the reference is not finite there; not checked")
                continue
            if not case.judge(sample["outputs"], expected, label, inputs):
                if sample.get("device_only"):
                    result.reasons[-1:] = ["timing_output_mismatch"]
                    result.message = (f"{label}: wrong in a call timed with the host's work queued ahead, where "
                                      f"every other checked call was right: {result.message}")
                elif changes and _right_when_fresh(case, inputs, expected):
                    result.reasons[-1:] = ["memoized_output"]
                    result.message = (f"{label}: wrong for the inputs as they were at that call, and right when called "
                                      f"afresh on them: an output kept from an earlier call was handed back "
                                      f"(memoization): {result.message}")
                else:
                    result.reasons[-1:] = ["timing_output_mismatch"]
                return False
            result.timed_checks += 1
    finally:
        case.release()
    if changes:
        result.notes.append(f"timed calls: inputs changed in place {reply['mutations']}x ({kind}) over "
                            f"{reply['rounds']} rounds; {result.timed_checks} sampled outputs checked")
    return True


def _right_when_fresh(case: Case, inputs: list, expected: list) -> bool:
    """Is the candidate right on a timed call's inputs when they come afresh (tensors it never saw, the same
    values)? Then the wrong timed output was one it kept, not one it computed."""
    reply = case.worker.ask({"op": "run", "inputs": inputs, "poison": []}, case.config.run_timeout)
    outputs = reply.get("outputs")
    return outputs is not None and len(outputs) == len(expected) and all(
        type(o) is torch.Tensor and o.shape == e.shape and o.dtype == e.dtype and compare(o, e, case.policy).ok
        for o, e in zip(outputs, expected))


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
            case._raised(reply)
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
    """Speedups beyond the sanity bound or faster than the roofline are flagged, never silently trusted.

    A flagged result whose sampled timed calls were checked on inputs changed in place (no output can have
    been reused) stands: the reference does work the kernel need not (diag(A) @ B done as a row scaling).
    Without such checks the flag stays unresolved, and a search never crowns the result."""
    result = case.result
    flagged = []
    if result.speedup_eager is not None and result.speedup_eager > sanity_bound:
        flagged.append(f"{result.speedup_eager:.1f}x over eager is beyond the sanity bound of {sanity_bound:g}x")
    if result.roofline_fraction is not None and result.roofline_fraction > 1.05:
        flagged.append(f"{result.roofline_fraction:.2f}x the roofline floor computed from the reference's work")
    if not flagged:
        return
    resolved = result.timed_checks > 0 and any(s.dtype.is_floating_point for s in case.ref.cost.inputs)
    result.review_resolved = resolved
    if resolved:
        result.flag("speedup_review", "; ".join(flagged) + f", and it held on {result.timed_checks} sampled timed "
                    "calls whose inputs changed in place: taken as real. The reference does work the kernel "
                    "does not need (its FLOP or byte count overstates the problem)")
    else:
        result.flag("speedup_review", "; ".join(flagged) + ": not confirmed (no timed call could be checked on "
                    "changed inputs); not trusted until the reference is checked for needless work")
