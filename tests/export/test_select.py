"""Which runs an export reads, and which filters make sense for which kind."""

from __future__ import annotations

import pytest

from kernelcraft.export import ExportError, Filters, resolve_runs
from kernelcraft.store import StoreError

pytestmark = pytest.mark.slow


def test_a_bench_id_names_all_its_runs_and_prefixes_name_one(runs):
    ids = [r.id for r in resolve_runs(runs.store, [runs.bench_id])]
    assert sorted(ids) == sorted(runs.bench_runs.values())
    assert [r.id for r in resolve_runs(runs.store, [runs.bench_id[:-2]])] == ids  # a bench by a unique prefix
    one = resolve_runs(runs.store, [runs.tree[:-2]])  # a unique prefix (the last 4 characters are random)
    assert [r.id for r in one] == [runs.tree]
    # a run named twice (itself, and through its bench) is read once, in the order first named
    both = resolve_runs(runs.store, [runs.bench_runs["level1/relu"], runs.bench_id, runs.refine])
    assert [r.id for r in both] == [runs.bench_runs["level1/relu"], runs.bench_runs["level1/sigmoid"], runs.refine]
    with pytest.raises(StoreError, match="no run"):
        resolve_runs(runs.store, ["nope"])


def test_model_selects_runs_by_proposer_with_or_without_its_provider(runs):
    run = runs.store.run(runs.tree)
    assert Filters(model=run.proposer).keeps_run(run)
    assert Filters(model=run.proposer.split("/", 1)[1]).keeps_run(run)
    assert not Filters(model="builtin").keeps_run(run)


@pytest.mark.parametrize("kind, filters, words", [
    ("rl", Filters(min_speedup=1.0), "--min-speedup selects candidates"),
    ("rl", Filters(correct_only=True), "--correct-only"),
    ("rl", Filters(statuses=("ok",)), "--status"),
    ("rl", Filters(categories=("memory",)), "--category"),
    ("sft", Filters(statuses=("incorrect",)), "sft rows are correct candidates"),
    ("trajectories", Filters(statuses=("wrong",)), "--status wrong: unknown"),
    ("trajectories", Filters(min_speedup=-1.0), "must not be negative"),
    ("parquet", Filters(), "unknown kind"),
])
def test_filters_that_make_no_sense_are_refused(kind, filters, words):
    with pytest.raises(ExportError, match=words):
        filters.check(kind)


def test_filters_that_make_sense_pass():
    for kind in ("sft", "trajectories"):
        Filters(correct_only=True, min_speedup=1.5, baseline="compile", categories=("memory",)).check(kind)
    Filters(statuses=("malformed", "not_evaluated", "ok")).check("trajectories")
    Filters(model="builtin").check("rl")


def test_an_apply_id_names_its_region_runs(tmp_path):
    from kernelcraft.spec import ApplySettings, ApplySpec, RunSpec
    from kernelcraft.store import Store

    store = Store(tmp_path / "runs.db")
    try:
        store.create_apply("apply-20261130-120000-abcd", "model", "src", ApplySpec(RunSpec(), ApplySettings(), "out"))
        for run_id, apply_id in (("region-a", "apply-20261130-120000-abcd"), ("alone", None)):
            store.create_run(run_id, "p", "src", "builtin", "cpu", RunSpec(), apply_id=apply_id)
        assert [r.id for r in resolve_runs(store, ["apply-20261130-120000"])] == ["region-a"]
    finally:
        store.close()
