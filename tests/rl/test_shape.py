"""The reward's shape: tiers in order by construction, speed in a log band, hacks and flags never above correct."""

from __future__ import annotations

import math

import pytest

from kernelcraft.result import Result, Status, Timing
from kernelcraft.rl import RewardShape, score_verdict
from kernelcraft.rl.shape import COMPILE_ERROR, CORRECT, MALFORMED, REJECTED, VERIFIER_ERROR, WRONG

KEYS = {"score", "tier", "format_ok", "compiled", "correct", "speedup", "status", "parse_error", "guard_findings",
        "flagged", "cached", "verifier_error"}


def verdict(status, *reasons, speedup=None, resolved=None, trials=3) -> Result:
    r = Result("level1/relu", "c", "triton", trials=trials)
    for reason in reasons:
        r.fail(status, reason, "why") if status != Status.OK else r.flag(reason, "why")
    if status == Status.OK:
        r.status, r.correct = Status.OK, True
        r.runtime = Timing(1.0, 0.01, 0.01, 10, 1.0, "cpu_perf_counter")
        r.speedup_eager, r.review_resolved = speedup, resolved
    return r


def test_the_tiers_are_in_order_and_speed_is_a_log_term():
    shape = RewardShape()
    malformed = score_verdict(shape, None, "no_code_block")
    compile_error = score_verdict(shape, verdict(Status.COMPILE_ERROR, "compile_failed"))
    wrong = [score_verdict(shape, verdict(s, "x")) for s in (Status.INCORRECT, Status.RUNTIME_ERROR, Status.TIMEOUT)]
    rejected = score_verdict(shape, verdict(Status.REJECTED, "inputs_modified"))
    slow, even, fast = (score_verdict(shape, verdict(Status.OK, speedup=s)) for s in (0.5, 1.0, 2.0))
    assert [malformed.tier, compile_error.tier, rejected.tier, slow.tier] == [MALFORMED, COMPILE_ERROR, REJECTED, CORRECT]
    assert {w.tier for w in wrong} == {WRONG} and len({w.score for w in wrong}) == 1
    assert malformed.score < compile_error.score < wrong[0].score < slow.score < even.score < fast.score
    assert rejected.score <= wrong[0].score and rejected.guard_findings == ("inputs_modified",)
    assert even.score == shape.correct and fast.score - even.score == pytest.approx(shape.speed_weight * math.log(2))
    # clipped to the band: nothing below the floor, nothing past the ceiling
    assert score_verdict(shape, verdict(Status.OK, speedup=1e-9)).score == pytest.approx(shape.floor)
    assert score_verdict(shape, verdict(Status.OK, speedup=1e9)).score == pytest.approx(shape.ceiling)
    for s in (malformed, compile_error, rejected, slow, *wrong):
        assert set(s.to_dict()) == KEYS  # verl needs the same keys for every completion
        assert all(isinstance(v, (int, float, str, bool)) for v in s.to_dict().values())


def test_a_flagged_speedup_scores_as_the_slowest_correct_kernel_unless_trusted_and_confirmed():
    floor = RewardShape()
    confirmed = verdict(Status.OK, "speedup_review", speedup=40.0, resolved=True)
    unconfirmed = verdict(Status.OK, "speedup_review", speedup=40.0, resolved=False)
    assert score_verdict(floor, confirmed).score == pytest.approx(floor.floor)
    trusting = RewardShape(flagged="trust_confirmed")
    assert score_verdict(trusting, confirmed).score == pytest.approx(trusting.ceiling)
    assert score_verdict(trusting, unconfirmed).score == pytest.approx(trusting.floor)
    assert score_verdict(floor, confirmed).flagged


def test_the_compile_baseline_is_read_where_asked_else_eager():
    r = verdict(Status.OK, speedup=2.0)
    r.speedup_compile = 0.5
    assert score_verdict(RewardShape(baseline="compile"), r).speedup == 0.5
    r.speedup_compile = None
    assert score_verdict(RewardShape(baseline="compile"), r).speedup == 2.0


def test_a_harness_fault_is_marked_for_the_trainer_to_mask():
    s = score_verdict(RewardShape(), verdict(Status.VERIFIER_ERROR, "harness_oom"))
    assert s.tier == VERIFIER_ERROR and s.verifier_error and s.to_dict()["verifier_error"] is True


@pytest.mark.parametrize("bad", [dict(rejected=0.5), dict(wrong=0.05), dict(compile_error=-1.0),
                                 dict(speed_weight=2.0), dict(speed_weight=0), dict(min_speedup=1.5),
                                 dict(max_speedup=0.9), dict(baseline="fastest"), dict(flagged="always")])
def test_a_shape_that_breaks_the_order_is_refused(bad):
    with pytest.raises(ValueError, match="reward shape"):
        RewardShape(**bad)


def test_shapes_from_options():
    assert RewardShape.of({"speed_weight": 0.2}, max_speedup=20).max_speedup == 20
    assert RewardShape.of(RewardShape(wrong=0.25)).wrong == 0.25
    with pytest.raises(ValueError, match="unknown parameter 'speed'"):
        RewardShape.of(speed=1)
