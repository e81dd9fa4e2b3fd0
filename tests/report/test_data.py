"""report/data.py on real runs: the trajectory is the stored best results, % of eager is eager time over
kernel time, the category pay-off counts are those the scripted run was built to give, benches carry
fast_p, and two runs or benches line up side by side."""

from __future__ import annotations

import pytest

from kernelcraft import ledger
from kernelcraft.metrics import bench_metrics
from kernelcraft.report import data
from kernelcraft.result import Result
from kernelcraft.search import outcome
from kernelcraft.spec import RunSpec
from kernelcraft.store import StoreError
from tests.helpers import FIXTURES

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tree(runs):
    return data.run_report(runs.store, runs.tree)


def stored(store, run_id, key) -> Result:
    cand = store.candidate(run_id, key)
    return store.result(cand.id)


def test_the_trajectory_is_the_stored_best_of_each_round(runs, tree):
    store = runs.store
    slow, fast = stored(store, runs.tree, "r01/i00/m00"), stored(store, runs.tree, "r02/i00/m00")
    assert slow.correct and fast.correct and fast.runtime_ms < slow.runtime_ms
    rows = tree["improvements"]
    assert [(t["round"], t["key"]) for t in rows] == [(1, "r01/i00/m00"), (2, "r02/i00/m00")]
    for t, r in zip(rows, (slow, fast)):
        assert t["runtime_ms"] == r.runtime_ms and t["eager_ms"] == r.eager_ms
        assert t["pct_of_eager"] == pytest.approx(100 * r.eager_ms / r.runtime_ms)
        assert t["pct_of_eager"] == pytest.approx(100 * r.speedup_eager, abs=0.01)  # the verifier rounds to 1e-4
    assert rows[0]["idea"] == "Use blocks of 512 elements" and rows[0]["category"] == "parallelism"
    assert rows[1]["idea"] == "Use blocks of 4096 elements" and rows[1]["category"] == "memory"
    # the last best is the run's best, as the store and `runs show` have it
    best_id = store.run(runs.tree).best_candidate
    assert tree["best"]["id"] == best_id == rows[-1]["candidate"] and "BLOCK = 4096" in tree["best"]["source"]
    assert tree["trajectory"] == outcome(store, runs.tree).to_dict()["trajectory"]
    assert [(t["round"], t["candidates"], t["correct"]) for t in tree["trajectory"]] == [(1, 3, 1), (2, 3, 2)]


def test_category_payoff_counts_on_the_scripted_run(runs, tree):
    # Round 1's kernels started from the reference: on the CPU, Triton's interpreter is far slower than
    # eager, so none of them pays off; in round 2 only the 4096-element kernel beat its parent.
    first = [c for c in tree["candidates"] if c["round"] == 1 and c["correct"]]
    assert first and all(c["speedup_eager"] < 1 and c["payoff_baseline"] == "eager" for c in first)
    cats = {c["category"]: c for c in tree["categories"]}
    assert set(cats) == {"parallelism", "precision", "memory", "control"}
    assert {k: (c["ideas"], c["paid_off"]) for k, c in cats.items()} == {
        "parallelism": (2, 0), "precision": (2, 0), "memory": (1, 1), "control": (1, 0)}
    assert {k: (c["candidates"], c["correct"]) for k, c in cats.items()} == {
        "parallelism": (2, 2), "precision": (2, 0), "memory": (1, 1), "control": (1, 0)}
    paid = {c["key"]: (c["paid_off"], c["payoff_baseline"]) for c in tree["candidates"]}
    assert paid["r02/i00/m00"] == (True, "parent") and paid["r02/i01/m00"] == (False, "parent")
    assert paid["r01/i01/m00"] == (False, None)  # wrong: nothing to compare
    assert "faster than the kernel it started from" in tree["payoff_definition"]


def test_run_report_facts_and_drill_down(runs, tree):
    p = tree["problems"][0]
    assert p["problem"] == "level1/relu" and p["correct"] and p["candidates"] == 6 and p["correct_candidates"] == 3
    assert p["rounds"] == 2 and p["runtime_ms"] == tree["best"]["runtime_ms"]
    assert tree["cpu_timings"] and tree["timing_methods"] == ["cpu_perf_counter"]
    assert p["roofline_ms"] is None  # no floor on a CPU
    by_key = {c["key"]: c for c in tree["candidates"]}
    wrong, prose = by_key["r01/i01/m00"], by_key["r01/i02/m00"]
    assert wrong["status"] == "incorrect" and wrong["reasons"] and wrong["max_rel_error"] > 0
    assert prose["status"] == "malformed" and prose["parse_error"] == "no_code_block"
    assert by_key["r02/i01/m00"]["duplicate"] and by_key["r02/i00/m00"]["parent"] == "r01/i00/m00"
    assert tree["counts"]["calls"] == 8 and tree["counts"]["input_tokens"] > 0


def test_bench_report_has_fast_p_over_its_runs(runs):
    r = data.bench_report(runs.store, runs.bench_a)
    rows = {p["problem"]: p for p in r["problems"]}
    assert set(rows) == {"level1/relu", "level1/sigmoid"} and rows["level1/relu"]["correct"] and not rows["level1/sigmoid"]["correct"]
    assert r["metrics"] == bench_metrics(r["problems"]) and r["metrics"]["fast_p_eager"]["0"] == 0.5
    curve = r["fast_p_curve"]
    assert curve["p"][0] == 0 and curve["eager"][0] == 0.5  # at p = 0: every correct kernel
    assert curve["eager"] == sorted(curve["eager"], reverse=True) and curve["eager"][-1] == 0.0
    assert [x["run"]["bench_id"] for x in r["runs"]] == [runs.bench_a] * 2


def test_resolve_names_runs_benches_and_prefixes(runs):
    assert ledger.resolve(runs.store, runs.bench_a) == ("bench", runs.bench_a)
    assert ledger.resolve(runs.store, runs.tree[:15]) == ("run", runs.tree) or runs.tree[:15] == runs.sample[:15]
    assert data.gather(runs.store, runs.sample)["kind"] == "run"
    with pytest.raises(StoreError, match="ambiguous"):
        ledger.resolve(runs.store, "bench-")
    with pytest.raises(StoreError, match="no run 'nope'"):
        ledger.resolve(runs.store, "nope")


def test_compare_two_runs_and_two_benches(runs, tree):
    sample = data.run_report(runs.store, runs.sample)
    both = data.compare(tree, sample)
    rows = {r["field"]: (r["a"], r["b"]) for r in both["rows"]}
    assert rows["strategy"] == ("tree", "sample") and rows["candidates"] == (6, 2) and rows["correct"] == (3, 1)
    assert rows["rounds"] == (2, 1) and rows["best_ms"] == (tree["best"]["runtime_ms"], sample["best"]["runtime_ms"])
    benches = data.compare(data.bench_report(runs.store, runs.bench_a), data.bench_report(runs.store, runs.bench_b))
    relu = next(r for r in benches["rows"] if r["problem"] == "level1/relu")
    assert relu["a"]["correct"] and relu["b"]["correct"]
    with pytest.raises(ValueError, match="not a run with a bench"):
        data.compare(tree, data.bench_report(runs.store, runs.bench_a))
    assert both["warnings"] == []  # one problem, one device


def test_two_runs_of_different_problems_compared_say_so(runs, tree):
    import copy

    other = copy.deepcopy(data.run_report(runs.store, runs.sample))
    other["run"]["problem"] = "level1/sigmoid"
    warnings = data.compare(tree, other)["warnings"]
    assert warnings == [f"A and B are runs of different problems ({tree['run']['problem']}, level1/sigmoid): their "
                        "times are not comparable, and each speedup is over its own problem's baseline"]
    from rich.console import Console

    from kernelcraft.report.terminal import compare_view
    console = Console(width=250, record=True)
    console.print(compare_view(data.compare(tree, other)))
    assert "note: A and B are runs of different problems" in console.export_text()


def test_a_bench_counts_the_problems_it_could_not_cover(verifier, tmp_path):
    """The built-in engineer covers relu, not the spectrum fixture (an rfft): the bench starts one run, keeps the other (and why),
    and its report counts two problems, one correct, as the bench's own summary did."""
    from kernelcraft.problems import load_problem
    from kernelcraft.propose.builtin.proposer import BuiltinProposer
    from kernelcraft.search import RunConfig, run_bench
    from kernelcraft.store import Store

    store = Store(tmp_path / "runs.db")
    try:
        summary = run_bench(store, "two", [load_problem("level1/relu"), load_problem(FIXTURES / "problems" / "spectrum.py")],
                            BuiltinProposer("cpu"), verifier,
                            RunSpec(RunConfig(strategy="tree", backend="triton", rounds=1, ideas=1, impls=1)))
        report = data.bench_report(store, summary["bench_id"])
    finally:
        store.close()
    started = [p for p in report["problems"] if p["run_id"]]
    assert len(started) == 1 and started[0]["correct"] and started[0]["problem"] == "level1/relu"
    (missing,) = [p for p in report["problems"] if p["status"] == "not_covered"]
    assert missing["problem"] == "spectrum" and not missing["correct"]
    assert "fft_rfft" in missing["reason"]
    assert report["metrics"] == summary["metrics"] and report["metrics"]["problems"] == 2
    assert report["metrics"]["correct"] == 1
    from rich.console import Console

    from kernelcraft.report.page import render
    from kernelcraft.report.terminal import bench_report_view

    assert "spectrum" in render(report)
    console = Console(width=160, record=True)
    console.print(bench_report_view(report))
    text = console.export_text()
    assert "spectrum" in text and "not covered" in text


def test_the_result_view_says_where_a_time_is_the_hosts():
    """A timing whose host time a call is longer than its median shows that cost, the median beside it."""
    from rich.console import Console

    from kernelcraft.report.terminal import result_view
    from kernelcraft.result import Result, Status, Timing

    def timing(median, host=None):
        return Timing(median, 0.001, 0.01, 50, median, "cuda_events+l2_flush", host, median)

    r = Result("p", "c", "triton", Status.OK, True, runtime=timing(0.0502, 0.0523), eager=timing(0.0623, 0.0392),
               compiled=timing(0.1403, 0.1526))
    console = Console(width=160, record=True)
    console.print(result_view(r))
    text = console.export_text()
    assert "torch.compile  0.1526 ms (host time a call; median 0.1403 ms)" in text
    assert "candidate      0.0523 ms (host time a call; median 0.0502 ms)" in text
    assert "PyTorch eager  0.0623 ms " in text and "0.0623 ms (host" not in text
