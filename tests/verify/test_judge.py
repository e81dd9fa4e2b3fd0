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


def test_outside_clock_calls_fill_its_time_within_its_memory():
    assert judge.outside_calls(0.01, 1 << 20, 1 << 20, "cuda") == judge.OUTSIDE_MAX_CALLS  # tiny calls: the cap
    assert judge.outside_calls(10.0, 1 << 20, 1 << 20, "cuda") == 4  # 40 ms of calls
    assert judge.outside_calls(0.01, 6 << 30, 6 << 30, "cuda") == 1  # KernelBench's ReLU: one set at a time
    assert judge.outside_calls(0.01, 100 << 20, 100 << 20, "cuda") == 3  # 512 MiB beyond one set


def _split(fresh_ms, partial_ms, eager_fresh=1.0, eager_partial=1.0, n=5):
    return {"candidate": {"fresh_ms": fresh_ms, "partial_ms": partial_ms, "fresh": n, "partial": n},
            "eager": {"fresh_ms": eager_fresh, "partial_ms": eager_partial, "fresh": n, "partial": n}}


def test_a_candidate_slower_on_fresh_inputs_than_on_changed_ones_is_stateful(tmp_path):
    case = _case(tmp_path)
    assert judge.stateless(case, _split(1.05, 1.0))  # noise
    assert judge.stateless(case, _split(2.0, 1.0, eager_fresh=2.0))  # eager too: the machine, not the candidate
    assert judge.stateless(case, _split(5.0, 1.0, n=2))  # too few calls to say
    assert judge.stateless(case, None)
    assert judge.stateless(case, _split(0.007, 0.0047, eager_fresh=0.01, eager_partial=0.01))  # µs: timer noise
    assert not judge.stateless(case, _split(2.0, 1.0))
    assert case.result.reasons == ["stateful_output"] and "fully fresh" in case.result.message


# -- fp32 judged as fp32 against float64 (Case.judge, Case._against_exact) ----------------------------------------

RAND_MATMUL = """import torch
import torch.nn as nn

M = N = 16
K = 4096
SMALL_SIZES = {"M": 16, "N": 16, "K": 4096}


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
"""

ONE_PASS_VARIANCE = """import torch
import torch.nn as nn

rows, n = 64, 2048
SMALL_SIZES = {"rows": 64, "n": 2048}
INPUT_DISTRIBUTIONS = ["natural"]


class Model(nn.Module):
    def forward(self, x):
        return (x * x).mean(dim=1) - x.mean(dim=1) ** 2


def get_inputs():
    return [10 ** (4 * torch.rand(rows, 1)) + torch.randn(rows, n)]


def get_init_inputs():
    return []
"""


def _problem_case(tmp_path, name: str, source: str, policy: str = "strict") -> judge.Case:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    sup = Supervisor("cpu", small_config(tmp_path / "cache", policy=policy), BaselineStore(tmp_path / "baselines.json"))
    ref = sup.reference(load_problem(str(path)))
    return judge.Case(None, ref, Result(name, "precision", "triton"), sup.policy, sup.device, sup.config,
                      sup.l2_bytes, sup.spec)


def test_a_trials_fp32_outputs_are_judged_against_float64_element_by_element(tmp_path):
    case = _problem_case(tmp_path, "rand_matmul", RAND_MATMUL)
    inputs = draw_inputs(case.ref.module, "cpu", SEED)
    a, b = inputs
    expected = case.reference_outputs(inputs)
    bf16 = [a.bfloat16().float() @ b.bfloat16().float()]  # ~3e-5 of the output, up to ~1.5e-4 of an element
    assert case.judge(bf16, expected, "timed call", inputs)  # within strict of torch's output
    assert not case.judge(bf16, expected, "trial 0 (natural)", inputs, precision=True)
    assert case.result.reasons == ["precision"] and case.result.max_rel_error > 1e-4
    assert case.result.message.startswith("trial 0 (natural), output 0: within the tolerance of torch's fp32 output")
    # fp32 in another order passes; under relaxed (no precision rule) bf16 passes as before
    chunked = sum(a[:, i:i + 512] @ b[i:i + 512] for i in range(0, 4096, 512))
    honest = _problem_case(tmp_path, "rand_matmul", RAND_MATMUL)
    assert honest.judge([chunked], expected, "trial 0 (natural)", inputs, precision=True), honest.result.message
    assert honest.result.notes == []  # passed against torch and float64: nothing to say
    relaxed = _problem_case(tmp_path, "rand_matmul", RAND_MATMUL, policy="relaxed")
    assert relaxed.judge(bf16, relaxed.reference_outputs(inputs), "trial 0 (natural)", inputs, precision=True)


def test_an_ill_conditioned_output_is_judged_against_the_references_rounding_at_each_element(tmp_path):
    case = _problem_case(tmp_path, "one_pass_variance", ONE_PASS_VARIANCE)
    inputs = draw_inputs(case.ref.module, "cpu", SEED)
    (x,) = inputs
    expected = case.reference_outputs(inputs)
    # the same formula with the sums in another order: rounding noise like torch's where the rows' offsets are large
    parts, squares = x.view(64, 16, -1).sum(dim=2), (x * x).view(64, 16, -1).sum(dim=2)
    other = squares.flip(1).cumsum(dim=1)[:, -1] / 2048 - (parts.flip(1).cumsum(dim=1)[:, -1] / 2048) ** 2
    assert case.judge([other], expected, "trial 0 (natural)", inputs, precision=True), case.result.message
    assert any(note.startswith("trial 0 (natural), output 0: judged against float64") for note in case.result.notes)
    # an estimate from 64 of each row's elements: off by ~20% where torch is exact
    assert not case.judge([x[:, ::32].var(dim=1)], expected, "trial 1 (natural)", inputs, precision=True)
    assert case.result.reasons == ["mismatch"] and "against float64, element by element" in case.result.message

