"""`kernelcraft export` from the command line, on the package's stored runs."""

from __future__ import annotations

import json

import pyarrow.json as pj
import pyarrow.parquet as pq
import pytest

from kernelcraft.cli import main

pytestmark = pytest.mark.slow


def last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_export_each_kind_and_say_what_was_written(runs, tmp_path, capsys):
    db = str(runs.store.path)
    out = tmp_path / "traj.parquet"
    assert main(["export", runs.bench_id, runs.tree[:-2], out.as_posix(), "--kind", "trajectories",
                 "--store", db, "--status", "incorrect", "--status", "rejected", "--json"]) == 0
    summary = last_json(capsys)
    table = pq.read_table(out)
    assert summary["format"] == "parquet" and summary["path"] == str(out) and summary["runs"] == 3
    assert summary["rows"] == table.num_rows == 7  # relu: the wrong and the kernel-less one; sigmoid: all five
    assert set(table.column("status").to_pylist()) == {"incorrect", "rejected"}
    assert summary["filters"] == {"status": ["incorrect", "rejected"]} and summary["candidates_read"] == 14

    sft = tmp_path / "sft.jsonl"
    assert main(["export", runs.bench_id, runs.tree, runs.refine, str(sft), "--kind", "sft", "--store", db,
                 "--min-speedup", "0", "--model", "scripted-model", "--json"]) == 0
    summary = last_json(capsys)
    assert summary["format"] == "jsonl" and summary["rows"] == pj.read_json(sft).num_rows == 7
    assert summary["duplicates_dropped"] == 1 and summary["filters"] == {"min_speedup": 0.0, "baseline": "eager",
                                                                          "model": "scripted-model"}

    none = tmp_path / "none.jsonl"  # candidates read and none kept: said why, and what keeps more
    assert main(["export", runs.tree, str(none), "--kind", "sft", "--store", db, "--min-speedup", "1e9"]) == 0
    text = capsys.readouterr()
    assert "wrote 0 sft row(s)" in text.out and "no row: no candidate passed the filters above" in text.err
    from kernelcraft.cli.export import _why_none
    assert _why_none("sft", None, "eager").endswith("--min-speedup 0 keeps every correct one")

    rl = tmp_path / "rl.jsonl"
    assert main(["export", runs.bench_id, str(rl), "--kind", "rl", "--store", db, "--format", "parquet"]) == 0
    text = capsys.readouterr()
    assert f"wrote 2 rl row(s) (parquet) to {rl}" in text.out and "filters: none" in text.out
    assert "exporting rl from 2 run(s)" in text.err  # progress on stderr
    assert pq.read_table(rl).column("data_source").to_pylist() == ["kernelcraft"] * 2

    # an existing file is kept unless --force
    assert main(["export", runs.bench_id, str(rl), "--kind", "rl", "--store", db]) == 2
    err = capsys.readouterr().err.strip()
    assert "exists; pass --force" in err and len(err.splitlines()) == 1
    assert pq.read_table(rl).num_rows == 2
    assert main(["export", runs.bench_id, str(rl), "--kind", "rl", "--store", db, "--force", "--format", "parquet",
                 "--json"]) == 0
    assert last_json(capsys)["rows"] == 2


@pytest.mark.parametrize("extra, words", [
    (["--kind", "rl", "--min-speedup", "1.5"], "--min-speedup selects candidates; rl rows are problems"),
    (["--kind", "rl", "--correct-only"], "--correct-only selects candidates"),
    (["--kind", "sft", "--status", "ok"], "--status: sft rows are correct candidates"),
    (["--kind", "trajectories", "--status", "fast"], "--status fast: unknown"),
    (["--kind", "trajectories", "--category", "speed"], "--category speed: unknown"),
    (["--kind", "parquet"], "invalid choice"),
    ([], "--kind"),
])
def test_usage_errors_are_one_line_and_exit_2(runs, extra, words, tmp_path, capsys):
    argv = ["export", runs.tree, str(tmp_path / "x.jsonl"), "--store", str(runs.store.path), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1
    assert not (tmp_path / "x.jsonl").exists()


def test_unknown_runs_and_stores_are_usage_errors(tmp_path, capsys):
    assert main(["export", "nope", str(tmp_path / "x.jsonl"), "--kind", "sft", "--store", str(tmp_path / "no.db")]) == 2
    assert "no run store at" in capsys.readouterr().err
    from kernelcraft.store import Store

    Store(tmp_path / "empty.db").close()
    assert main(["export", "nope", str(tmp_path / "x.jsonl"), "--kind", "sft", "--store", str(tmp_path / "empty.db")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no run 'nope'" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "x.jsonl").exists()


def test_runs_and_out_may_be_split_by_options_and_a_name_must_say_its_format(runs, tmp_path, capsys):
    db = str(runs.store.path)
    out = tmp_path / "sft.parquet"
    # the usage a user wrote: runs, options, then OUT (argparse alone took OUT as an unknown argument)
    assert main(["export", runs.tree, runs.refine, "--kind", "sft", "--format", "parquet", str(out), "--store", db,
                 "--min-speedup", "0", "--json"]) == 0
    summary = last_json(capsys)
    assert summary["path"] == str(out) and summary["runs"] == 2 and pq.read_table(out).num_rows == summary["rows"]
    # a name that says no format we write is refused, not silently written as JSONL
    assert main(["export", runs.tree, str(tmp_path / "rows.csv"), "--kind", "sft", "--store", db]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot tell the format from .csv" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "rows.csv").exists()
    assert main(["export", runs.tree, str(tmp_path / "rows.csv"), "--kind", "sft", "--store", db, "--format", "jsonl",
                 "--min-speedup", "0"]) == 0  # --format says it
    assert main(["export", runs.tree, "--kind", "sft", "--store", db]) == 2  # no OUT
    assert "then OUT" in capsys.readouterr().err
    assert main(["export", runs.tree, str(tmp_path / "x.jsonl"), "--kind", "sft", "--store", db, "--bogus"]) == 2
