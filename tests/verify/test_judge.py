"""The supervisor's judgement of a timing's sampled outputs (`judge._timed_samples`), on the CPU with a real
reference: each sample's inputs are rebuilt from its round and changes and its outputs compared against them."""

from __future__ import annotations

import torch

from kernelcraft.problems import load_problem
from kernelcraft.result import Result
from kernelcraft.verify import judge
from kernelcraft.verify.baselines import BaselineStore
from kernelcraft.verify.inputs import draw_inputs, mutate_inputs, mutation_kind
from kernelcraft.verify.supervisor import Supervisor
from tests.helpers import small_config

SEED = 1234


def _case(tmp_path) -> judge.Case:
    sup = Supervisor("cpu", small_config(tmp_path / "cache"), BaselineStore(tmp_path / "baselines.json"))
    ref = sup.reference(load_problem("level1/relu"))
    result = Result("level1/relu", "sampled", "triton")
    # No worker: a sample wrong only in the device-only calls is judged without calling the candidate again.
    return judge.Case(None, ref, result, sup.policy, sup.device, sup.config, sup.l2_bytes, sup.spec)


def _sample(case: judge.Case, round_: int, mutations: list[int], device_only: bool = False, wrong: bool = False):
    """A sampled call's record as the worker sends it, its output the reference's own (zeros where `wrong`)."""
    inputs = draw_inputs(case.ref.module, "cpu", SEED + round_)
    for mutation in mutations:
        mutate_inputs(inputs, mutation, mutation_kind(case.ref.module))
    out = case.reference_outputs(inputs)[0]
    return {"round": round_, "mutations": mutations, "outputs": [torch.zeros_like(out) if wrong else out.clone()],
            "device_only": device_only}


def _reply(samples: list) -> dict:
    return {"samples": samples, "mutations": sum(len(s["mutations"]) for s in samples), "rounds": 3}


def test_right_samples_are_all_checked(tmp_path):
    case = _case(tmp_path)
    samples = [_sample(case, 0, [11]), _sample(case, 1, [12, 13]), _sample(case, 2, [14, 15, 16], device_only=True)]
    assert judge._timed_samples(case, SEED, _reply(samples))
    assert case.result.timed_checks == 3 and not case.result.failed


def test_a_device_only_sample_is_checked_last_and_named_for_what_it_caught(tmp_path):
    # Listed first, it is still judged after every other sample: those were right, so the candidate told the
    # device-only calls apart from the rest, and the reason says so (not memoization, whatever a fresh call gives).
    case = _case(tmp_path)
    samples = [_sample(case, 2, [14, 15, 16], device_only=True, wrong=True), _sample(case, 0, [11]),
               _sample(case, 1, [12, 13])]
    assert not judge._timed_samples(case, SEED, _reply(samples))
    assert case.result.timed_checks == 2
    assert case.result.reasons == ["timing_output_mismatch"]
    assert case.result.message.startswith("device-only timed call (round 2, inputs changed 3x in place)")


def _split(fresh_ms, partial_ms, eager_fresh=1.0, eager_partial=1.0, n=5):
    return {"candidate": {"fresh_ms": fresh_ms, "partial_ms": partial_ms, "fresh": n, "partial": n},
            "eager": {"fresh_ms": eager_fresh, "partial_ms": eager_partial, "fresh": n, "partial": n}}


def test_the_split_of_fresh_and_changed_calls_names_a_stateful_candidate(tmp_path):
    case = _case(tmp_path)
    assert judge.stateful_split(case, _split(1.05, 1.0)) is None  # noise
    assert judge.stateful_split(case, _split(2.0, 1.0, eager_fresh=2.0)) is None  # eager too: the machine
    assert judge.stateful_split(case, _split(5.0, 1.0, n=2)) is None  # too few calls to say
    assert judge.stateful_split(case, None) is None
    assert judge.stateful_split(case, _split(0.007, 0.0047, eager_fresh=0.01, eager_partial=0.01)) is None  # µs
    said = judge.stateful_split(case, _split(2.0, 1.0))
    assert said and "fully fresh" in said and "2.00x" in said
    assert case.result.reasons == []  # a diagnosis for the outside clock's finding, never a verdict alone
