"""The report's and the exports' best kernel, and an idea's payoff, judged beyond the timings' spread,
on a store written by hand: two correct candidates whose medians differ by less than their IQRs."""

from __future__ import annotations

import pytest

from kernelcraft.export import Filters, build_rows
from kernelcraft.ledger import trajectory
from kernelcraft.report.data import run_report
from kernelcraft.result import Result, Status, Timing
from kernelcraft.spec import RunSpec
from kernelcraft.store import Store


def _timing(median: float, iqr: float) -> Timing:
    return Timing(median, iqr, 0.01, 40, median, "cpu_perf_counter")


def _result(median: float | None, iqr: float, eager: float = 1.0, eager_iqr: float = 0.1) -> Result:
    ok = median is not None
    return Result("level1/relu", "c", "triton", Status.OK if ok else Status.INCORRECT, ok,
                  runtime=_timing(median, iqr) if ok else None, eager=_timing(eager, eager_iqr),
                  speedup_eager=round(eager / median, 4) if ok else None, device="cpu", trials=3)


@pytest.fixture
def store(tmp_path) -> Store:
    """Round 1: a (0.50 ms +- 0.10) then b (0.46 ms +- 0.10, noise away); round 2: c (0.30 ms +- 0.01),
    clearly faster, from idea 1 on parent a; d from idea 2 on parent a, 0.48 ms: inside the spread."""
    s = Store(tmp_path / "runs.db")
    s.create_run("run1", "level1/relu", "src", "openai/m", "cpu", RunSpec())
    idea1 = s.add_idea("run1", "r02/ideas/00", 2, None, None, "vectorise", "memory access")
    idea2 = s.add_idea("run1", "r02/ideas/01", 2, None, None, "unroll", "control flow and loops")
    for key, round_, parent, idea, median, iqr in (("r01/i00/m00", 1, None, None, 0.50, 0.10),
                                                   ("r01/i01/m00", 1, None, None, 0.46, 0.10),
                                                   ("r02/i00/m00", 2, "r01/i00/m00", idea1, 0.30, 0.01),
                                                   ("r02/i01/m00", 2, "r01/i00/m00", idea2, 0.48, 0.02)):
        call = s.add_call("run1", key, "implement", "openai/m", [{"role": "system", "content": "s"},
                          {"role": "user", "content": key}], "answer " + key, None, 1, 1, 0.0, 1, 0.0, 0.1)
        parent_id = s.candidate("run1", parent).id if parent else None
        cid = s.add_candidate("run1", key, round_, call, idea, parent_id, "proposer", "triton", f"# {key}")
        s.add_result(cid, _result(median, iqr))
    return s


def test_stored_rows_carry_the_runtime_iqr(store):
    assert [r.runtime_iqr_ms for r in store.candidates("run1")] == [0.10, 0.10, 0.01, 0.02]


def test_the_trajectory_keeps_the_earlier_kernel_inside_the_spread(store):
    traj = trajectory(store.candidates("run1"))
    assert [t["best_key"] for t in traj] == ["r01/i00/m00", "r02/i00/m00"]  # the old rule: r01/i01/m00 first


def test_an_idea_pays_off_only_beyond_the_parents_spread(store):
    cands = {c["key"]: c for c in run_report(store, "run1")["candidates"]}
    assert cands["r02/i00/m00"]["paid_off"] and not cands["r02/i01/m00"]["paid_off"]  # 0.48 < 0.50, but noise
    # against eager (1.0 ms +- 0.1): 0.50 +- 0.1 is clearly faster
    assert cands["r01/i00/m00"]["paid_off"] and cands["r01/i00/m00"]["payoff_baseline"] == "eager"


def test_the_rl_rows_best_is_judged_beyond_the_spread(store):
    [row], _ = build_rows(store, [store.run("run1")], "rl")
    assert row["extra_info"]["best_source"] == "# r02/i00/m00"
    # round 1 alone: b's 0.46 ms is noise away from a's 0.50 ms, so a (the earlier) is the best
    store.db.execute("DELETE FROM results WHERE candidate_id IN (SELECT id FROM candidates WHERE round = 2)")
    [row], _ = build_rows(store, [store.run("run1")], "rl")
    assert row["extra_info"]["best_source"] == "# r01/i00/m00"


def test_sft_keeps_only_kernels_faster_than_eager_beyond_the_spread(store, tmp_path):
    store.create_run("run2", "level1/relu", "src", "openai/m", "cpu", RunSpec())
    call = store.add_call("run2", "k", "implement", "openai/m", [{"role": "user", "content": "k"}], "a", None,
                          1, 1, 0.0, 1, 0.0, 0.1)
    cid = store.add_candidate("run2", "k", 1, call, None, None, "proposer", "triton", "# noise")
    store.add_result(cid, _result(0.95, 0.1))  # speedup 1.05 over eager's 1.0 +- 0.1: inside the spread
    rows, _ = build_rows(store, [store.run("run2")], "sft", Filters())
    assert rows == []
    rows, _ = build_rows(store, [store.run("run1")], "sft", Filters())
    assert {r["step_key"] for r in rows} == {"r01/i00/m00", "r01/i01/m00", "r02/i00/m00", "r02/i01/m00"}
