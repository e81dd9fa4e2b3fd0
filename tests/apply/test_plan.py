"""The apply's plan: regions that only reshape or copy, or take a sliver of the model's time, are left alone; the
rest in order of their share, the budget split in proportion; Amdahl's bound and the predicted speedup."""

from __future__ import annotations

import time

import pytest

from kernelcraft.apply.budget import Deadline
from kernelcraft.apply.plan import amdahl, plan
from kernelcraft.apply.profile import Profile, RegionTime


def _profile():
    regions = [RegionTime("00_linear_a", "linear", 2.0, 0.2), RegionTime("01_layout_b", "layout", 1.0, 0.1),
               RegionTime("02_conv_c", "conv", 6.0, 0.6), RegionTime("03_elementwise_d", "elementwise", 0.1, 0.01)]
    return Profile("cuda:0", "cuda_events", 10.0, regions, 0.91)


def test_the_largest_share_first_with_the_budget_split_by_share():
    plans = plan(_profile(), budget_minutes=8.0)
    assert [(p.name, p.optimize) for p in plans] == [("02_conv_c", True), ("00_linear_a", True),
                                                     ("01_layout_b", False), ("03_elementwise_d", False)]
    # each its floor (1 min), the other 6 minutes split 3:1 by share
    assert plans[0].minutes == pytest.approx(1 + 6 * 0.75) and plans[1].minutes == pytest.approx(1 + 6 * 0.25)
    assert plans[2].why == "it only reshapes or copies" and "under 2%" in plans[3].why
    assert all(p.minutes is None for p in plan(_profile()))  # no budget: each run's own limits


def test_amdahl():
    shares = {"a": 0.6, "b": 0.2}
    assert amdahl(shares, {"a": 2.0}) == pytest.approx(1 / (0.4 + 0.3))
    assert amdahl(shares, {"a": float("inf"), "b": float("inf")}) == pytest.approx(5.0)
    assert amdahl(shares, {}) == 1.0


def test_a_budget_too_small_for_every_region_leaves_the_smallest_shares_out():
    plans = plan(_profile(), budget_minutes=1.6)  # one floor fits: the largest share gets the whole budget
    assert [(p.name, p.optimize) for p in plans][:2] == [("02_conv_c", True), ("00_linear_a", False)]
    assert plans[0].minutes == pytest.approx(1.6) and "ran out" in plans[1].why
    assert plan(_profile(), budget_minutes=0.2)[0].minutes == pytest.approx(0.2)  # under one floor: all of it


def test_regions_the_proposer_cannot_cover_take_no_budget():
    plans = plan(_profile(), budget_minutes=2.0, unable={"02_conv_c": "cannot cover it: conv_tbc"})
    assert [(p.name, p.optimize, p.minutes) for p in plans][0] == ("00_linear_a", True, 2.0)
    assert next(p for p in plans if p.name == "02_conv_c").why == "cannot cover it: conv_tbc"


def test_instances_of_one_problem_are_planned_once_at_their_summed_share():
    regions = [RegionTime("00_linear_a", "linear", 1.0, 0.1), RegionTime("01_conv_c", "conv", 3.0, 0.3),
               RegionTime("02_linear_a", "linear", 1.0, 0.1), RegionTime("03_linear_a", "linear", 1.0, 0.1)]
    like = {"00_linear_a": "00_linear_a", "01_conv_c": "01_conv_c", "02_linear_a": "00_linear_a",
            "03_linear_a": "00_linear_a"}
    plans = {p.name: p for p in plan(Profile("cpu", "cpu_perf_counter", 10.0, regions, 0.6), 4.0, 0.15, like=like)}
    first = plans["00_linear_a"]  # 10% alone, under the 15% floor; 30% as three instances
    assert first.optimize and first.share == pytest.approx(0.3) and first.instances == [
        "00_linear_a", "02_linear_a", "03_linear_a"]
    assert first.minutes == pytest.approx(plans["01_conv_c"].minutes)  # equal shares, equal budgets
    for name in ("02_linear_a", "03_linear_a"):
        assert not plans[name].optimize and plans[name].like == "00_linear_a" and plans[name].minutes is None
        assert plans[name].why.startswith("the same problem as 00_linear_a")


def test_the_deadline_keeps_a_reserve_for_the_end_to_end_verdict():
    assert Deadline.of(None).for_runs_s() is None and not Deadline.of(None).over()
    assert Deadline.of(10).reserve_s == pytest.approx(120.0)  # a fifth of 10 minutes
    assert Deadline.of(1).reserve_s == pytest.approx(20.0)  # at least 20 s
    assert Deadline.of(0.5).reserve_s == pytest.approx(15.0)  # never more than half
    spent = Deadline(60.0, started=time.monotonic() - 50.0)
    assert spent.for_runs_s() == 0.0 and not spent.over()  # the runs' time is gone, the reserve is not
    assert Deadline(60.0, started=time.monotonic() - 61.0).over()


def test_the_reserve_holds_twice_what_the_models_baselines_took():
    """BERT-base bf16 on an H200: its baselines took 42 s, the compiled form's verdict 70 s; a 3.5 minute budget's
    fifth (42 s) did not hold it."""
    deadline = Deadline.of(3.5)
    assert deadline.reserve_s == pytest.approx(42.0)
    deadline.expect_model_verdict(42.0)
    assert deadline.reserve_s == pytest.approx(84.0)
    deadline.expect_model_verdict(10.0)  # a shorter measure does not shrink it
    assert deadline.reserve_s == pytest.approx(84.0)
    deadline.expect_model_verdict(200.0)
    assert deadline.reserve_s == pytest.approx(105.0)  # never more than half
    assert deadline.sooner(10.0).reserve_s == pytest.approx(100.0)  # moved sooner: its own half, the same expectation


def test_a_deadline_moved_sooner_ends_that_much_earlier_from_the_same_start():
    started = time.monotonic() - 50.0
    sooner = Deadline(60.0, started=started).sooner(15.0)
    assert sooner.budget_s == 45.0 and sooner.started == started and sooner.over()
    assert Deadline.of(None).sooner(5.0).budget_s is None
