"""The outside clock: the supervisor's own clock over calls on inputs it wrote, with outputs it checks.

Everything the worker reports (its events, its host clock, the outputs it sampled and copied) is computed in the
candidate's process, which can reach the harness's modules there and change them. The outside clock is the
supervisor's: it lends the worker `calls` input sets and output slots of its own memory, writes fresh values into
every set (the worker frozen meanwhile), and times from outside one request in which the worker calls the
candidate once per set, back to back, and copies each output into its slot. Inside its clock the supervisor reads
back a secret sample of every slot's elements; after it, it checks that sample unchanged (no output was still
being written when the worker said it was done) and every call's output against the reference. Its time a call
(the slot copies taken off, as the supervisor measures them itself) may exceed the worker's cost a call by
OUTSIDE_RATIO and a round trip's slack; beyond that the worker's timing is not its calls' (`timing_tampered`): a
timer reached through `sys.modules`, or a candidate faster on inputs it has seen a variant of than on fresh ones.
Back-to-back calls skip the L2 flush and overlap launches, so they may only be faster than the worker's timed
calls. A second spin always follows on the same tensors, every value rewritten: an output handed back because the
tensor was seen before is wrong there (`memoized_output`), whatever the worker's copies of its sampled timed
outputs said (a candidate can reach the copy and recompute just those).

What each call's output is checked against: OUTSIDE_PRECISE calls of each spin, chosen in secret, in full (their
inputs fingerprinted, the reference run after the spin, fp32 outputs against float64 too); every other call at
OUTSIDE_CHECKED secret places (all of a smaller output), against the reference run on its inputs before the spin,
so nothing the worker does to those inputs moves it. An output wrong there is judged in full on the inputs drawn
again from their seed (an ill-conditioned element may be torch's rounding). The trials judge whole outputs; here a
call left undone or a kept output is wrong nearly everywhere, and an output wrong at a share f of its elements is
missed with odds (1 − f)^OUTSIDE_CHECKED while it saves at most f of a call. Judging every element of every call
cost ~35 ms a call on an H200 (KernelBench's softmax at 1 GB an output: 0.6 s of a spin's 1 s, its calls 13 ms).

Spins all over the limit are not yet a verdict (`last=False`): the candidate is timed again (verify/speed.py) and
its clock checked against that time, as the load of a shared machine may have moved between the two (CI's two
cores, beside another pytest worker: an honest Triton kernel in the interpreter was timed at 13-22 ms a call from
one verdict to the next, its spins 14-25 ms). The time published is the one the clock passed, so a candidate that
reports another time when timed again gains nothing from it.
"""

from __future__ import annotations

import math
import random
import secrets
import time
from dataclasses import dataclass

import numpy as np
import torch

from kernelcraft.verify.containment import cpu_seconds
from kernelcraft.verify.check import compare_sampled, sample_reference
from kernelcraft.verify.inputs import SPREAD, distributions_for, draw_inputs, fresh_seed, precision_rotation
from kernelcraft.verify.judge import Case, all_finite, fair
from kernelcraft.verify.memory import fingerprint, new_key

OUTSIDE_TARGET_MS = {"cuda": 40.0, "cpu": 80.0}  # a spin's calls, together
OUTSIDE_MAX_CALLS = 256
# bytes of the staged input sets and output slots beyond one of each: on a GPU up to a quarter of its free memory
# (a spin's fixed cost is spread over more calls: with 8 GiB, 17 sets of a 256 MiB ReLU left a 4x timer within it)
OUTSIDE_MEMORY = {"cuda": 32 << 30, "cpu": 512 << 20}
OUTSIDE_ATTEMPTS = 3  # a spin over the limit is run again on fresh values (host jitter does not repeat)
# spins run whatever the first one's time: the second on the same tensors, every value rewritten in place, the
# first of its calls on the tensors of the last spin's last call and the rest in a secret order, so an output kept
# by the tensor it came from (its identity, its address, its version counter) is checked from outside
OUTSIDE_MIN_SPINS = 2
# the worker's cost a call times this, at most: on a CPU shared by the supervisor, its other workers and whatever
# else runs (two cores in CI), a spin of a few calls caught an honest kernel at 1.5x there
OUTSIDE_RATIO = {"cuda": 1.25, "cpu": 2.0}
# (a spin's round trip and a frozen worker's wake-up, a call's loop and launch work) the clock may add
# (1.0-1.8 ms a spin measured on an H200 over a request to a frozen worker and back, whatever its calls)
OUTSIDE_SLACK_MS = {"cuda": (3.0, 0.004), "cpu": (8.0, 0.05)}
OUTSIDE_SAMPLE = 4096  # elements of each output read back inside the clock
OUTSIDE_PRECISE = 4  # calls of each spin, chosen in secret, judged in full and against float64 (the precision rule)
OUTSIDE_CHECKED = 1 << 16  # secret places of each output of every other call (f = 1e-4 missed with odds 0.15%)
OUTSIDE_RETIMES = 1  # times a candidate whose spins were all over the limit is timed again before the verdict


def outside_calls(cost_ms: float, input_bytes: int, output_bytes: int, device_type: str,
                  free_bytes: int | None = None) -> int:
    """How many input sets one spin of the outside clock calls on: enough for its round trip to be small beside
    the calls, within OUTSIDE_MEMORY and a quarter of `free_bytes` (at least one)."""
    by_time = math.ceil(OUTSIDE_TARGET_MS[device_type] / max(cost_ms, 1e-3))
    room = OUTSIDE_MEMORY[device_type] if free_bytes is None else min(OUTSIDE_MEMORY[device_type], free_bytes // 4)
    by_memory = 1 + room // max(input_bytes + output_bytes, 1)
    return int(max(1, min(OUTSIDE_MAX_CALLS, by_time, by_memory)))


def outside_clock(case: Case, last: bool = True) -> bool | None:
    """The supervisor's own clock over calls on fresh inputs it wrote, with outputs it checks (see above): True,
    or False with the failure recorded; None where every spin was over the limit and this is not the `last` check
    (nothing recorded but a note: the caller times the candidate again)."""
    result, ref, device = case.result, case.ref, case.device
    cost = result.runtime.cost_ms
    case.release()
    free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else None
    calls = outside_calls(cost, ref.cost.input_bytes, ref.cost.output_bytes, device.type, free)
    dists = _outside_distributions(ref.module, calls, str(device))
    seeds = [fresh_seed() for _ in dists]
    sets = [draw_inputs(ref.module, str(device), seed, dist) for seed, dist in zip(seeds, dists)]
    slots = [torch.empty((calls, *spec.shape), dtype=spec.dtype, device=device) for spec in ref.cost.outputs]
    reply = case.worker.ask({"op": "stage", "sets": sets, "slots": [[big[i] for big in slots] for i in range(calls)]},
                            case.config.run_timeout)
    if "error" in reply:
        case._raised(reply)
        return False
    spin_slack, call_slack = OUTSIDE_SLACK_MS[device.type]
    limit = OUTSIDE_RATIO[device.type] * cost + call_slack + spin_slack / calls
    timeout = case.config.run_timeout + calls * cost / 1e3 * 20
    best, attempts, checked, copy_ms = math.inf, 0, 0, 0.0
    order = list(range(calls))
    answered = True  # the worker answered every request: it can be asked to let the staged memory go
    try:
        for attempt in range(OUTSIDE_ATTEMPTS):
            attempts += 1
            if attempt:  # fresh values in every set, written while the worker is frozen
                seeds = [fresh_seed() for _ in dists]
                for staged, seed, dist in zip(sets, seeds, dists):
                    for x, y in zip(staged, draw_inputs(ref.module, str(device), seed, dist)):
                        if isinstance(x, torch.Tensor):
                            x.copy_(y)
                order = _next_order(order)
            elapsed = _spin(case, Staged(sets, slots, seeds, dists), timeout, attempt, order)
            if elapsed is None:
                return False
            checked += calls
            copy_ms = _copy_ms(slots, calls, device)
            best = min(best, (elapsed - copy_ms) / calls)
            if best <= limit and attempts >= OUTSIDE_MIN_SPINS:
                break
    except BaseException:  # a worker that timed out or died is not asked again
        answered = False
        raise
    finally:
        sets = slots = None
        if answered:
            case.worker.ask({"op": "unstage"}, case.config.run_timeout)
        case.release()
    retimed = result.outside_clock.get("retimed", 0) + bool(result.outside_clock)
    result.outside_clock = {"per_call_ms": round(best, 6), "calls": calls, "attempts": attempts,
                            "limit_ms": round(limit, 6), "copy_ms": round(copy_ms, 4), "checked": checked,
                            "retimed": retimed}
    result.notes.append(f"outside clock: {best:.4g} ms a call over {calls} back-to-back calls on fresh inputs the "
                        f"supervisor wrote and checked ({checked} outputs); the worker's cost {cost:.4g} ms"
                        + ("" if best <= limit or last else f", over its limit ({limit:.4g} ms): timed again"))
    if best > limit and not last:
        return None
    if best > limit:
        seen = f"the supervisor's clock saw {best:.4g} ms a call over {calls} calls on fresh inputs, the worker's " \
               f"timing {cost:.4g} ms (limit {limit:.4g} ms)"
        if case.stateful:
            result.fail("rejected", "stateful_output", f"{seen}, and {case.stateful}: it reuses work from earlier "
                        "calls, fast only on inputs it has seen a variant of")
        else:
            result.fail("rejected", "timing_tampered", f"{seen}: the timing reported from the candidate's process is "
                        "not its calls' (a timer changed there, or a candidate faster on inputs it has seen a "
                        "variant of than on fresh ones)")
        return False
    return True


@dataclass
class Staged:
    """The input sets and output slots lent to the worker, and the seed and distribution each set was drawn from
    (a set drawn again from them is the set as written)."""
    sets: list
    slots: list
    seeds: list[int]
    dists: list[str]


def _next_order(last: list[int]) -> list[int]:
    """The sets' order for a spin after `last`: its last set first (a candidate keeping one output sees the tensor
    it kept), the rest shuffled in secret (one keeping many cannot tell which comes next)."""
    rest = last[:-1]
    random.Random(secrets.randbits(64)).shuffle(rest)
    return [last[-1], *rest]


def _spin(case: Case, staged: Staged, timeout: float, attempt: int, order: list[int]) -> float | None:
    """One timed spin: the milliseconds from the request to the supervisor's own read of the outputs, or None after
    recording why the spin is not believed."""
    result, device, ref = case.result, case.device, case.ref
    sets, slots = staged.sets, staged.slots
    for big in slots:
        big.fill_(float("nan") if big.is_floating_point() else -1)
    # chosen in secret before the spin: the calls judged in full; the others' references seen at secret places now
    precise = set(random.Random(secrets.randbits(64)).sample(range(len(sets)), min(len(sets), OUTSIDE_PRECISE)))
    full = precise if all(spec.dtype.is_floating_point for spec in ref.cost.outputs) else set(range(len(sets)))
    seen_refs = {}
    for i, inputs in enumerate(sets):
        if i not in full:
            seen_refs[i] = [sample_reference(e, _check_positions(e.numel(), device))
                            for e in case.reference_outputs(inputs)]
    case.release()
    key = new_key()
    watched = [x for i in sorted(full) for x in sets[i]]
    before = fingerprint(watched, key)
    positions = [torch.from_numpy(_secret_positions(big.numel())).to(device) for big in slots]
    _sync(device)
    cpu_before = cpu_seconds(case.worker.proc.pid) if case.cores else 0.0
    start = time.perf_counter()
    reply = case.worker.ask({"op": "spin", "order": order}, timeout)
    if "error" in reply:
        case._raised(reply)
        return None
    seen = [big.view(-1)[p] for big, p in zip(slots, positions)]
    _sync(device)
    elapsed = (time.perf_counter() - start) * 1e3
    if not fair(case, cpu_before, elapsed / 1e3):
        return None
    if any(not torch.equal(a.view(torch.uint8), big.view(-1)[p].view(torch.uint8))
           for a, big, p in zip(seen, slots, positions)):
        result.fail("rejected", "timing_tampered", "outside clock: outputs were still being written after the worker "
                    "said its calls were done (its work ran past the clock)")
        return None
    changed = [i for i, (a, b) in enumerate(zip(fingerprint(watched, key), before)) if a != b]
    if changed:
        result.fail("rejected", "inputs_modified", "outside clock: the candidate changed an input it was lent")
        return None
    worst, judged = 0.0, 0
    where = "fresh inputs" if not attempt else "the same tensors as the last spin, every value rewritten"
    for i, inputs in enumerate(sets):
        outputs, label = [big[i] for big in slots], f"outside clock call {i} (spin {attempt + 1}, {where})"
        error = _judge_call(case, staged, i, outputs, seen_refs.get(i), label, precise=i in precise)
        if error is False:
            if attempt:  # right on these tensors a spin ago, wrong now their values changed: it kept an output
                result.reasons[-1:] = ["memoized_output"]
                result.message = (f"{result.message}: the outside clock's last spin was right on these tensors, so "
                                  "an output kept from an earlier call was handed back (memoization)")
            else:
                result.reasons[-1:] = ["timing_output_mismatch"]
            return None
        if error is not None:
            worst, judged = max(worst, error), judged + 1
    result.trial_errors.append({"trial": f"outside clock (spin {attempt + 1}, {judged} calls on "
                                         f"{'fresh inputs' if not attempt else 'the same tensors, rewritten'})",
                                "max_rel_error": worst})
    return elapsed


def _judge_call(case: Case, staged: Staged, i: int, outputs: list, seen: list | None, label: str, precise: bool):
    """Call `i`'s outputs judged: its worst error; None where the reference is not finite (not judged); False after
    recording the failure. `seen`: its references at secret places, else it is judged in full (`Case.judge`, with
    the precision rule where `precise`)."""
    if seen is None:
        expected = case.reference_outputs(staged.sets[i])
        if not all_finite(expected):
            return None
        return case.last_error if case.judge(outputs, expected, label, staged.sets[i], precision=precise,
                                             record=False) else False
    if not bool(torch.stack([s.finite for s in seen]).all()):
        return None
    errors = [compare_sampled(out, s, case.policy) for out, s in zip(outputs, seen)]
    if all(e.ok for e in errors):
        return max(e.max_rel_error for e in errors)
    # wrong at a secret place: judged in full on its inputs drawn again, where torch's rounding is told apart
    inputs = draw_inputs(case.ref.module, str(case.device), staged.seeds[i], staged.dists[i])
    return case.last_error if case.judge(outputs, case.reference_outputs(inputs), label, inputs,
                                         record=False) else False


def _outside_distributions(module, calls: int, device: str) -> list[str]:
    """The distribution of each staged set: natural, and where every input is one-signed every other one `spread`
    (inputs.precision_rotation), so reduced precision shows on the outside clock's calls as on the trials'."""
    if calls < 2 or SPREAD not in precision_rotation(module, distributions_for(module),
                                                     draw_inputs(module, device, fresh_seed())):
        return ["natural"] * calls
    return ["natural" if i % 2 == 0 else SPREAD for i in range(calls)]


def _secret_positions(numel: int):
    rng = np.random.default_rng(secrets.randbits(128))
    return rng.integers(0, max(numel, 1), size=min(numel, OUTSIDE_SAMPLE), dtype=np.int64)


def _copy_ms(slots: list, calls: int, device: torch.device) -> float:
    """What the worker's copies of `calls` outputs into their slots cost, measured here on the same slots (after
    they were checked): one copy per call, the best of three."""
    def once() -> float:
        _sync(device)
        start = time.perf_counter()
        for big in slots:
            if calls > 1:
                for i in range(calls - 1):
                    big[i].copy_(big[i + 1])
            elif big.numel() > 1:
                flat, half = big.view(-1), big.numel() // 2
                flat[:half].copy_(flat[half:2 * half])
                flat[:half].copy_(flat[half:2 * half])
        _sync(device)
        return (time.perf_counter() - start) * 1e3 * (calls / (calls - 1) if calls > 1 else 1.0)
    return min(once() for _ in range(3))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _check_positions(numel: int, device: torch.device) -> torch.Tensor:
    """OUTSIDE_CHECKED secret flat positions of an output of `numel` elements (every one where it has fewer)."""
    if numel <= OUTSIDE_CHECKED:
        return torch.arange(numel, device=device)
    rng = np.random.default_rng(secrets.randbits(128))
    return torch.from_numpy(rng.integers(0, numel, size=OUTSIDE_CHECKED, dtype=np.int64)).to(device)
