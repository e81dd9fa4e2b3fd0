"""search/bench.py: how many runs a bench starts together, and that runs together keep the one-by-one table."""

from __future__ import annotations

import pytest

from kernelcraft import api
from kernelcraft.errors import ConfigError
from kernelcraft.search.bench import runs_at_once
from kernelcraft.spec import Budget, RunConfig
from kernelcraft.store import Store


def test_three_runs_per_gpu_one_per_device_on_the_cpu_or_under_a_wall_budget():
    assert runs_at_once(["cuda:0"], RunConfig()) == 3
    assert runs_at_once(["cuda:0@a1b2", "cuda:1@a1b2", "cuda:0@c3d4", "cuda:1@c3d4"], RunConfig()) == 12
    assert runs_at_once(["cpu"], RunConfig()) == 1
    assert runs_at_once(["cpu@a1b2", "cpu@c3d4"], RunConfig()) == 2  # a cluster's CPU actors
    assert runs_at_once(["cuda:0", "cuda:1"], RunConfig(budget=Budget(wall_s=600))) == 2
    assert runs_at_once([], RunConfig()) == 1


@pytest.mark.slow
def test_runs_at_once_on_one_device_overlap_and_keep_the_problems_order(tmp_path):
    db = tmp_path / "runs.db"
    summary = api.bench(["level1/relu", "level1/sigmoid"], device="cpu", rounds=1, ideas=1, max_candidates=1,
                        runs_at_once=2, store=db, cache_dir=tmp_path / "cache", compile_baseline=False,
                        timing_budget=0.3, sizes={"batch_size": 5})
    assert summary["runs_at_once"] == 2
    assert [r["problem"] for r in summary["rows"]] == ["level1/relu", "level1/sigmoid"]
    assert all(r["correct"] for r in summary["rows"])
    store = Store(db)
    try:
        runs = sorted(store.runs(), key=lambda r: r.created)
        bench = store.bench(summary["bench_id"])
    finally:
        store.close()
    assert runs[1].created < runs[0].updated  # the second began before the first ended
    assert bench.config["runs_at_once"] == 2


def test_runs_at_once_below_one_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="--runs-at-once must be at least 1, got 0"):
        api.bench(["level1/relu"], device="cpu", runs_at_once=0, store=tmp_path / "runs.db")
