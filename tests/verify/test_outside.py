"""The outside clock's parts on the CPU (verify/outside.py): how many calls a spin makes, and how a call's outputs
are judged (in full, or at secret places against the reference seen before the spin, in full again where wrong).
Whole verdicts with it, cheats and twins, are in tests/adversarial/test_trust_boundary.py."""

from __future__ import annotations

import torch

from kernelcraft.problems import load_problem
from kernelcraft.result import Result
from kernelcraft.verify import judge, outside
from kernelcraft.verify.baselines import BaselineStore
from kernelcraft.verify.check import compare_sampled, sample_reference
from kernelcraft.verify.inputs import draw_inputs
from kernelcraft.verify.policy import get_policy
from kernelcraft.verify.supervisor import Supervisor
from tests.helpers import small_config

STRICT = get_policy("strict")
SEED = 77


def test_outside_clock_calls_fill_its_time_within_its_memory():
    assert outside.outside_calls(0.01, 1 << 20, 1 << 20, "cuda") == outside.OUTSIDE_MAX_CALLS  # tiny calls: the cap
    assert outside.outside_calls(10.0, 1 << 20, 1 << 20, "cuda") == 4  # 40 ms of calls
    assert outside.outside_calls(0.01, 6 << 30, 6 << 30, "cuda") == 3  # KernelBench's ReLU: three sets
    assert outside.outside_calls(0.01, 6 << 30, 6 << 30, "cuda", free_bytes=40 << 30) == 1  # where 40 GiB are free
    assert outside.outside_calls(0.01, 100 << 20, 100 << 20, "cpu") == 3  # 512 MiB beyond one set
    assert outside.outside_calls(0.01, 100 << 20, 100 << 20, "cuda") == 164  # 32 GiB on a GPU
    assert outside.outside_calls(0.01, 100 << 20, 100 << 20, "cuda", free_bytes=1 << 30) == 2  # a quarter of what is free


def test_a_small_output_is_checked_everywhere_and_a_large_one_at_secret_places():
    assert torch.equal(outside._check_positions(100, torch.device("cpu")), torch.arange(100))
    a, b = (outside._check_positions(1 << 24, torch.device("cpu")) for _ in range(2))
    assert a.numel() == outside.OUTSIDE_CHECKED and int(a.min()) >= 0 and int(a.max()) < 1 << 24
    assert not torch.equal(a, b)  # drawn afresh, in secret, for every output


def test_a_sampled_comparison_is_comparisons_rule_at_its_places_with_the_whole_outputs_rms():
    ref = torch.randn(1000) * 10
    ref[0] = 1e-3  # small beside the rms: an error of 1e-4 of the rms there passes, as in `compare`
    places = torch.arange(0, 1000, 7)
    seen = sample_reference(ref, places)
    assert compare_sampled(ref.clone(), seen, STRICT).ok
    near = ref.clone()
    near[0] += 1e-4
    assert compare_sampled(near, seen, STRICT).ok
    off = ref.clone()
    off[7] *= 1.01
    worse = compare_sampled(off, seen, STRICT)
    assert not worse.ok and worse.reason == "mismatch" and "1 of 143 elements" in worse.detail
    off[14] = float("nan")
    assert compare_sampled(off, seen, STRICT).reason == "non_finite"
    off[14], off[7] = ref[14], ref[7]
    off[3] = 0.0  # not a sampled place: not seen
    assert compare_sampled(off, seen, STRICT).ok
    assert not bool(sample_reference(torch.tensor([1.0, float("inf")]), torch.arange(1)).finite)
    empty = torch.empty(0, 3)
    assert compare_sampled(empty, sample_reference(empty, outside._check_positions(0, torch.device("cpu"))), STRICT).ok


def _case(tmp_path):
    sup = Supervisor("cpu", small_config(tmp_path / "cache"), BaselineStore(tmp_path / "baselines.json"))
    ref = sup.reference(load_problem("level1/softmax"))
    return judge.Case(None, ref, Result("level1/softmax", "c", "triton"), sup.policy, sup.device, sup.config,
                      sup.l2_bytes, sup.spec)


def _staged(case) -> outside.Staged:
    inputs = draw_inputs(case.ref.module, "cpu", SEED, "natural")
    return outside.Staged([inputs], [], [SEED], ["natural"])


def test_a_call_judged_at_secret_places_passes_when_right_and_fails_when_wrong(tmp_path, monkeypatch):
    monkeypatch.setattr(outside, "OUTSIDE_CHECKED", 64)
    case = _case(tmp_path)
    staged = _staged(case)
    seen = [sample_reference(e, outside._check_positions(e.numel(), case.device))
            for e in case.reference_outputs(staged.sets[0])]
    right = case.reference_outputs(staged.sets[0])
    error = outside._judge_call(case, staged, 0, right, seen, "call 0", precise=False)
    assert error is not False and error <= STRICT.fp32 and not case.result.failed
    assert outside._judge_call(case, staged, 0, [torch.zeros_like(right[0])], seen, "call 0", precise=False) is False
    assert case.result.reasons == ["mismatch"] and case.result.message.startswith("call 0")


def test_a_call_that_changed_its_inputs_is_judged_against_the_reference_of_the_inputs_it_was_lent(tmp_path):
    # the reference was seen before the call; its output, right for the inputs it changed, is wrong for those lent,
    # and judged in full on the inputs drawn again from their seed
    case = _case(tmp_path)
    staged = _staged(case)
    seen = [sample_reference(e, outside._check_positions(e.numel(), case.device))
            for e in case.reference_outputs(staged.sets[0])]
    staged.sets[0][0].mul_(3.0)
    moved = case.reference_outputs(staged.sets[0])
    assert outside._judge_call(case, staged, 0, moved, seen, "call 0", precise=False) is False
    assert case.result.reasons == ["mismatch"]


def test_a_call_judged_in_full_is_not_judged_where_the_reference_is_not_finite(tmp_path):
    case = _case(tmp_path)
    staged = _staged(case)
    staged.sets[0][0][0, 0] = float("inf")
    staged.sets[0][0][0, 1] = float("-inf")  # a row of inf - inf: NaN in torch's softmax
    out = case.reference_outputs(staged.sets[0])
    assert outside._judge_call(case, staged, 0, out, None, "call 0", precise=True) is None
