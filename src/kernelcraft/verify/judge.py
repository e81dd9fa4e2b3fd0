"""The trusted checks of one evaluation, run by the supervisor against a worker.

Each function takes the evaluation's context (`Case`), asks the worker for something, judges what
comes back, and records findings on the result as named reasons. Order of an evaluation:
`trials` (correctness on fresh secret inputs, the first one run twice for determinism) →
`attribution` (which kernels ran) → `timing` (inputs changed in place between calls; sampled timed
outputs re-checked; fully fresh calls no slower than the others) → `outside_clock` (the supervisor's
own clock over calls on fresh inputs it wrote, outputs it checks: verify/outside.py) → `review`.

Memory: a trial holds its inputs (no private copy: a keyed fingerprint proves them unchanged), the
reference's outputs and the candidate's, and lets them go before the next trial is drawn.

Over 400 lines on purpose: the trusted checks of an evaluation are read as one. The outside clock, the last
of them, is a module of its own (verify/outside.py).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import torch

from kernelcraft import hardware
from kernelcraft.result import Result
from kernelcraft.verify.check import Comparison, check_form, compare, compare_exact, rounding, worst_rounding
from kernelcraft.verify.config import VerifyConfig
from kernelcraft.verify.containment import affinity_widened, cpu_seconds, descendants
from kernelcraft.verify.inputs import (NUDGE_ULPS, distributions_for, draw_inputs, fresh_seed, has_floating,
                                       mutate_inputs, mutation_kind, nudged, perturbed, precision_rotation)
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
    cores: set[int] | None = None  # a CPU worker's cores (its baselines' too), None where not pinned
    last_error: float = 0.0  # the worst error of the last outputs `judge` passed
    stateful: str | None = None  # what the worker's timing says of its fully fresh calls (stateful_split)
    first_timeout: float | None = None  # the first run's, where it compiles a whole model (Candidate.compiles)
    calls: int = 0  # runs asked of the worker

    def reference_outputs(self, inputs: list, model=None) -> list:
        with torch.no_grad(), reference_math(not self.policy.allow_tf32):
            out = (model if model is not None else self.ref.model)(*inputs)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def exact_outputs(self, inputs: list, model=None) -> list | None:
        """The reference in float64 (a copy of the model, or `model`, a float64 copy made before; the inputs
        widened), or None, noted, where it cannot be had: an op without float64, or not enough free memory for it."""
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
            free, _ = torch.cuda.mem_get_info(self.device)
            needed = 4 * self.ref.cost.peak_bytes  # float64 of fp32 work is twice as wide; fp16 four times
            if needed > free:
                self._note_once(f"float64 reference skipped: it needs ~{needed / GiB:.1f} GiB, "
                                f"{free / GiB:.1f} GiB are free")
                return None
        try:
            model = model if model is not None else copy.deepcopy(self.ref.model).double()
            wide = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            with torch.no_grad():
                out = model(*wide)
            return list(out) if isinstance(out, (tuple, list)) else [out]
        except Exception as exc:  # asked for on every trial: a reference that will not run in float64 is noted
            self._note_once(f"float64 reference unavailable: {type(exc).__name__}: {str(exc)[:200]}")
            return None

    def _note_once(self, note: str) -> None:  # asked for on every trial (the precision rule): said once
        if note not in self.result.notes:
            self.result.notes.append(note)

    def rounding_noise(self, inputs: list, expected: list, exact: list) -> list | None:
        """The reference's own rounding at every element of each floating output (check.rounding): the largest
        error against float64 of torch's output and of `policy.rounding_samples` more runs of the reference, each
        against a float64 run on the same inputs, perturbed (inputs.perturbed) by up to 1% on every other run (there
        the exact output lands afresh on the grid, where an accurate torch op rounds the same way on every nudge of
        an ulp) and by up to NUDGE_ULPS units of roundoff on the rest (there an ill-conditioned element stays as
        ill-conditioned as drawn: a softmax row whose top two scores nearly tie, which a 1% move unties, so that
        torch's one error there, small by chance, was all the rule had: level 1's 97 on an H200). Where no input
        is a float to nudge (a language model's token ids), the model's parameters are nudged instead
        (inputs.nudged; each run a model of its own, in its dtype and in float64): else every run would repeat
        torch's one error, and a deep bf16 model's rounding, which lands anywhere on each element, would be judged
        against an error near zero by chance on many of them. None, noted, where the memory for it is short or
        float64 is not to be had."""
        weights = not has_floating(inputs)
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
            free, _ = torch.cuda.mem_get_info(self.device)
            needed = 4 * self.ref.cost.peak_bytes + self.ref.cost.input_bytes
            if weights:  # a nudged copy of the parameters, then the same in float64
                needed += 5 * sum(p.numel() * p.element_size() for p in self.ref.model.parameters())
            if needed > free:
                self._note_once(f"the reference's rounding not sampled per element: it needs ~{needed / GiB:.1f} "
                                f"GiB, {free / GiB:.1f} GiB are free")
                return None
        try:
            model = None if weights else copy.deepcopy(self.ref.model).double()
        except Exception:
            return None
        noise = [rounding(r, x) if r.is_floating_point() and x.shape == r.shape else None
                 for r, x in zip(expected, exact)]
        generator = torch.Generator(device=self.device).manual_seed(fresh_seed())
        for i in range(self.policy.rounding_samples):
            ulps = NUDGE_ULPS if i % 2 else None
            if weights:
                near, model = inputs, nudged(self.ref.model, generator, ulps)
                again = self.reference_outputs(near, model)
                model = model.double()
            else:
                near = perturbed(inputs, generator, ulps=ulps)
                again = self.reference_outputs(near)
            wide = self.exact_outputs(near, model)
            if wide is None:
                return None
            for n, y, x in zip(noise, again, wide):
                if n is not None and y.shape == n.shape == x.shape:
                    rounding(y, x, into=n)
            near = again = wide = None
            if weights:
                model = None
        return noise

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
        elif reply.get("exit"):  # SystemExit from the candidate's code: an exit, not a verdict
            self.result.fail("runtime_error", "early_exit", f"the candidate's code raised {reply['error']} inside "
                             f"its call (an exit is no output):\n{reply.get('traceback') or ''}".rstrip())
        else:
            self.result.fail("runtime_error", "candidate_raised", reply.get("traceback") or reply["error"])

    def run(self, inputs: list) -> list | None:
        """Lend `inputs` to the worker for one call; its outputs, or None after recording why not."""
        poison = [(s.shape, s.dtype) for s in self.ref.cost.outputs]
        timeout = self.first_timeout if self.first_timeout and not self.calls else self.config.run_timeout
        self.calls += 1
        reply = self.worker.ask({"op": "run", "inputs": inputs, "poison": poison}, timeout)
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
        record_compiles(self.result, reply.get("compiles") or [])
        return reply["outputs"]

    def judge(self, outputs: list, expected: list, label: str, inputs: list | None = None,
              precision: bool = False, record: bool = True) -> bool:
        """Compare outputs with the reference's; where one fails on values alone and the inputs are given,
        judge it again against float64 (an ill-conditioned output is torch's rounding, not the candidate's).
        With `precision` (a trial's outputs) under a policy with that rule, an fp32 output that passes is judged
        against float64 too (check.compare_exact): reduced-precision math passes against torch's fp32 output
        wherever the inputs' distribution hides its rounding, never element by element against float64. A pass adds
        its worst error to `trial_errors` unless `record` is False (the outside clock records one entry a spin);
        `last_error` holds it either way."""
        form = check_form(outputs, expected, self.device)
        if form:
            self.result.fail("incorrect", form[0], f"{label}: {form[1]}")
            return False
        worst, exact, noise = 0.0, None, None

        def sampled(i: int):  # the reference's rounding at every element, sampled once for all outputs
            nonlocal noise
            if noise is None:
                noise = self.rounding_noise(inputs, expected, exact) or []
            return noise[i] if i < len(noise) else None

        for i, (out, ref) in enumerate(zip(outputs, expected)):
            cmp = compare(out, ref, self.policy)
            wrong = not cmp.ok and cmp.reason == "mismatch"
            precise = cmp.ok and precision and self.policy.precision and out.dtype == torch.float32
            if (wrong or precise) and inputs is not None and out.is_floating_point():
                exact = exact if exact is not None else (self.exact_outputs(inputs) or [])
                if i < len(exact) and exact[i].shape == out.shape:
                    cmp = self._against_exact(out, ref, exact[i], cmp, f"{label}, output {i}",
                                              lambda i=i: sampled(i))
            worst = max(worst, cmp.max_rel_error)
            if not cmp.ok:
                self.result.max_rel_error = max(self.result.max_rel_error or 0.0, cmp.max_rel_error)
                self.result.fail("incorrect", cmp.reason, f"{label}, output {i}: {cmp.detail}")
                return False
        self.result.max_rel_error = max(self.result.max_rel_error or 0.0, worst)
        self.last_error = worst
        if record:
            self.result.trial_errors.append({"trial": label, "max_rel_error": worst})
        return True

    def _against_exact(self, out, ref, exact, first: Comparison, label: str, sampled=None) -> Comparison:
        """`first` (against torch's output) judged again against float64, element by element: against torch's own
        error at each element, then, where that fails, against the reference's rounding sampled over several runs
        (`sampled()`; one error can be near zero by chance), or, where no sample can be had, against torch's worst
        error over the whole output."""
        second = compare_exact(out, ref, exact, self.policy)
        if not second.ok and sampled is not None:
            noise = sampled()
            if noise is not None:
                second = compare_exact(out, ref, exact, self.policy, noise, 1 + self.policy.rounding_samples)
            else:
                second = compare_exact(out, ref, exact, self.policy, worst_rounding(ref, exact))
        if first.ok:
            if second.ok:
                return first
            return Comparison(False, second.max_rel_error, "precision", f"within the tolerance of torch's fp32 output "
                              f"(error {first.max_rel_error:.3g}), not of float64 where torch's own rounding is "
                              f"smaller: {second.detail}")
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


def all_finite(expected: list) -> bool:
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
            if trial == 0:  # one-signed inputs: a trial that spreads their magnitudes (inputs.precision_rotation)
                rotation = precision_rotation(case.ref.module, distributions, inputs)
                if rotation != distributions:
                    result.notes.append("trials: every input is one-signed, so 'spread' (magnitudes spread over "
                                        "16 decades, reduced precision shown) takes the place of 'offset'")
                distributions = rotation
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
            if not all_finite(expected):
                result.notes.append(f"trial {trial}: the reference is not finite under '{dist}' inputs; skipped")
                continue
            if not case.judge(outputs, expected, f"trial {trial} ({dist})", inputs, precision=True):
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


def record_compiles(result: Result, rows: list[dict]) -> None:
    """Add what the worker's backends compiled (at import, or inside a call: backends.base.Backend.compiles) to the
    result: the compile time, the compilers' logs and the kernels' resources (ptxas's lines, else the rows' own).
    A description from the candidate's process, kept apart from every timing; no verdict reads it."""
    if not rows:
        return
    from kernelcraft.backends.cuda_inline import ptxas_summary

    seconds = sum(float(r.get("seconds") or 0.0) for r in rows if isinstance(r, dict))
    result.compile_seconds = round((result.compile_seconds or 0.0) + seconds, 4)
    logs = [str(r["log"]) for r in rows if isinstance(r, dict) and r.get("log")]
    if logs:
        result.compile_log = "\n".join(([result.compile_log] if result.compile_log else []) + logs)
    resources = ptxas_summary("\n".join(logs)) or [k for r in rows if isinstance(r, dict)
                                                    for k in r.get("resources") or [] if isinstance(k, dict)]
    result.kernels_resources = list(result.kernels_resources) + resources


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
    if not case.result.kernels_resources:  # no compiler said: what the profiler saw of the candidate's own kernels
        case.result.kernels_resources = [
            {"kernel": k["name"], "registers": k.get("registers"), "smem": k.get("shared_bytes")}
            for k in info["kernels"] if k.get("custom") and k.get("registers") is not None]
    case.result.notes.extend(info.get("notes") or [])
    finding = attribution_finding(info, allow_library)
    if finding:
        case.result.fail("rejected", *finding)
        return False
    return True


def attribution_finding(info: dict, allow_library: bool) -> tuple[str, str] | None:
    """(reason, message) for what an attribution (Attribution.to_dict()) shows wrong, else None.

    A kernel is the candidate's by what its own code launched or built in the call, never by name (attribution.py);
    a library kernel that merely carries the name of one the candidate declares is said so (hack class 29). Records
    written before a kernel had `evidence` read as before."""
    library = [k["name"] for k in info["kernels"] if not k["custom"]]
    if not any(k["custom"] for k in info["kernels"]):
        return "no_custom_kernel", "none of the candidate's own kernels ran" + (
            f"; what ran: {', '.join(library[:5])}" if library else "") + _named_like_own(info)
    if library and not allow_library:
        return "library_kernels", f"library kernels ran beside the candidate's: {', '.join(library[:5])}" + \
            _named_like_own(info)
    # The candidate's own kernels must run on the timing stream. Library kernels may not: PyTorch forks its
    # own streams for some ops (a grouped 3D transposed convolution runs on four, in the reference too) and
    # joins them before returning; work hidden that way still shows in the supervisor's clock check, and a
    # stream the candidate creates itself is refused by the static check.
    side = sorted({s for k in info["kernels"] if k["custom"] for s in k.get("streams") or []}
                  - {info["timing_stream"]})
    if info["timing_stream"] >= 0 and side:
        return "side_stream", f"the candidate's kernels ran on stream(s) {side}, not on the timing stream"
    return None


def _named_like_own(info: dict) -> str:
    """Why library kernels named like the candidate's are not its own (KernelShare.evidence), or ""."""
    from kernelcraft.verify.attribution import CALLS_EXCEED_LAUNCHES, INSIDE_LIBRARY_OP, NAME_ONLY

    why = {NAME_ONLY: "its code never launched (or built) a kernel of that exact name in the call",
           INSIDE_LIBRARY_OP: "it was launched inside a library op",
           CALLS_EXCEED_LAUNCHES: "more of them ran than the candidate's code launched"}
    named = [(k["name"], why[k.get("evidence")]) for k in info["kernels"]
             if not k["custom"] and k.get("evidence") in why]
    return "".join(f"; {name[:120]} carries the name of a kernel the candidate declares, but {reason}"
                   for name, reason in named[:3])


def timing(case: Case, seed: int) -> dict | None:
    """Time the candidate interleaved with the eager reference, the inputs changed in place between calls;
    then check the sampled timed calls' outputs against the reference on the inputs as they were then."""
    t = case.config.timing
    # Each kept sample holds one output in the worker: three where that is small, else one.
    out_bytes = case.ref.cost.output_bytes
    keep = 3 if 3 * out_bytes <= GiB else 1
    cpu_before = cpu_seconds(case.worker.proc.pid) if case.cores else 0.0
    start = time.perf_counter()
    reply = case.worker.ask({"op": "time", "seed": seed, "names": ["candidate", "eager"], "config": t,
                             "l2_bytes": case.l2_bytes, "keep": keep}, t.budget_s * 4 + case.config.run_timeout * 2)
    result = case.result
    if "error" in reply:
        case._raised(reply)
        return None
    result.runtime = reply["timings"]["candidate"]
    result.eager_control = reply["timings"]["eager"]
    result.memory["worker_peak_reserved"] = (reply.get("memory") or {}).get("worker_peak_reserved")
    if not fair(case, cpu_before, time.perf_counter() - start):
        return None
    case.stateful = stateful_split(case, reply.get("split"))
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
            if not all_finite(expected):
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


def fair(case: Case, cpu_before: float, wall_s: float) -> bool:
    """On a CPU the worker is pinned to the cores its baselines had (`Case.cores`): its tree may use no more CPU
    time than those cores give in the request's wall time, and no thread of it may have widened its own."""
    if not case.cores:
        return True
    pid = case.worker.proc.pid
    used = cpu_seconds(pid) - cpu_before
    allowed = wall_s * len(case.cores) * 1.25 + 0.05
    widened = affinity_widened(pid, case.cores)
    if widened:
        case.result.fail("rejected", "unfair_machine", f"{len(widened)} thread(s) of the candidate's process moved "
                         f"off the cores it was given ({sorted(case.cores)}), where the baselines ran")
        return False
    if used > allowed:
        case.result.fail("rejected", "unfair_machine", f"the candidate's process used {used:.3g} s of CPU in "
                         f"{wall_s:.3g} s on {len(case.cores)} core(s): more cores than the baselines had")
        return False
    return True


# Fully fresh calls this much slower than the others, where eager's are not: an output corrected, not computed.
STATEFUL_RATIO = 1.3
STATEFUL_SLACK_MS = {"cuda": 0.003, "cpu": 0.05}  # and slower by more than this: timer noise at a few µs a call


def stateful_split(case: Case, split: dict | None) -> str | None:
    """What the worker's own timing says of calls on fully fresh inputs against the others, where they were slower
    and eager's were not; else None. It names the outside clock's finding (`stateful_output`: the candidate reuses
    work from earlier calls); alone it decides nothing, as it comes from the candidate's process, and on a GPU an
    honest kernel's fresh calls were measured 1.7x slower there (KernelBench's 40, LayerNorm, on an H200)."""
    mine, control = (split or {}).get("candidate"), (split or {}).get("eager")
    if not mine or mine["fresh"] < 3 or mine["partial"] < 3 or not mine["partial_ms"]:
        return None
    ratio = mine["fresh_ms"] / mine["partial_ms"]
    control_ratio = (control["fresh_ms"] / control["partial_ms"]) if control and control.get("fresh_ms") and \
        control.get("partial_ms") else 1.0
    slower = mine["fresh_ms"] - mine["partial_ms"] > STATEFUL_SLACK_MS[case.device.type]
    if ratio > STATEFUL_RATIO and ratio > control_ratio + 0.25 and slower:
        return (f"its timed calls on fully fresh inputs took {mine['fresh_ms']:.4g} ms (median of {mine['fresh']}), "
                f"those where part of an input changed {mine['partial_ms']:.4g} ms ({ratio:.2f}x; eager "
                f"{control_ratio:.2f}x)")
    return None


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
    outside = result.outside_clock or {}
    resolved = (result.timed_checks > 0 and bool(outside.get("checked"))
                and any(s.dtype.is_floating_point for s in case.ref.cost.inputs))
    result.review_resolved = resolved
    if resolved:
        result.flag("speedup_review", "; ".join(flagged) + f", and it held on {result.timed_checks} sampled timed "
                    f"calls whose inputs changed in place and on {outside['checked']} calls on fully fresh inputs "
                    "timed and checked by the supervisor: taken as real. The reference does work the kernel does "
                    "not need (its FLOP or byte count overstates the problem)")
    else:
        result.flag("speedup_review", "; ".join(flagged) + ": not confirmed (no timed call could be checked on "
                    "changed inputs, or the outside clock did not run); not trusted until the reference is checked "
                    "for needless work")
