"""`kernelcraft report` from the command line, on real runs: terminal tables, one JSON object on the last
line of stdout, an HTML file, two runs or benches side by side, and one-line usage errors (exit 2)."""

from __future__ import annotations

import json

import pytest

from kernelcraft.cli import main
from kernelcraft.report import data

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # table cells unwrapped, so phrases can be searched for


def report(runs, capsys, *argv):
    code = main(["report", *map(str, argv), "--store", str(runs.store.path)])
    out, err = capsys.readouterr()
    return code, out, err


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_run_in_the_terminal(runs, capsys):
    code, out, err = report(runs, capsys, runs.tree)
    assert code == 0 and err == ""
    assert "best kernel by round" in out and "Use blocks of 4096 elements" in out and "ideas by category" in out
    assert "CPU timings" in out and runs.tree in out


def test_run_as_json_is_the_report(runs, capsys):
    code, out, _ = report(runs, capsys, runs.tree[:17], "--json")
    got = last_json(out)
    want = json.loads(json.dumps(data.run_report(runs.store, runs.tree)))
    assert code == 0 and got["html"] is None
    assert got["improvements"] == want["improvements"] and got["categories"] == want["categories"]
    assert got["problems"] == want["problems"] and got["trajectory"] == want["trajectory"]


def test_bench_and_html(runs, capsys, tmp_path):
    page = tmp_path / "sub" / "bench.html"
    code, out, err = report(runs, capsys, runs.bench_a, "--json", "--html", page)
    got = last_json(out)
    assert code == 0 and got["kind"] == "bench" and got["metrics"]["fast_p_eager"]["0"] == 0.5
    assert got["html"] == str(page) and f"wrote {page}" in err
    assert page.read_text().startswith("<!DOCTYPE html>") and runs.bench_a in page.read_text()
    code, out, _ = report(runs, capsys, runs.bench_a)
    assert code == 0 and "fast_0=0.50" in out and "1/2 problems with a correct kernel" in out


def test_two_runs_and_two_benches_side_by_side(runs, capsys, tmp_path):
    code, out, _ = report(runs, capsys, runs.tree, runs.sample, "--json", "--html", tmp_path / "both.html")
    got = last_json(out)
    rows = {r["field"]: (r["a"], r["b"]) for r in got["rows"]}
    assert code == 0 and got["kind"] == "compare_runs" and rows["strategy"] == ("tree", "sample")
    assert runs.sample in (tmp_path / "both.html").read_text()
    code, out, _ = report(runs, capsys, runs.tree, runs.sample)
    assert code == 0 and "A: best kernel by round" in out and "B: best kernel by round" in out
    code, out, _ = report(runs, capsys, runs.bench_a, runs.bench_b)
    assert code == 0 and "A vs eager: fast_0=0.50" in out and "B vs eager: fast_0=0.50" in out


@pytest.mark.parametrize("argv, words", [
    (["nope"], "no run 'nope'"),
    (["RUN", "RUN", "RUN"], "give one RUN, or two"),
    (["RUN", "BENCH"], "not a run with a bench"),
    (["bench-"], "is ambiguous"),
    (["RUN", "--html", "DIR"], "is a directory"),
    (["RUN", "--store", "MISSING"], "no run store at"),
])
def test_usage_errors_are_one_line_and_exit_2(runs, capsys, tmp_path, argv, words):
    names = {"RUN": runs.tree, "BENCH": runs.bench_a, "DIR": str(tmp_path), "MISSING": str(tmp_path / "x.db")}
    argv = [names.get(a, a) for a in argv]
    store = [] if "--store" in argv else ["--store", str(runs.store.path)]
    assert main(["report", *argv, *store]) == 2
    out, err = capsys.readouterr()
    assert out == "" and words in err and len(err.strip().splitlines()) == 1 and err.startswith("kernelcraft report")
    assert not (tmp_path / "x.db").exists()  # a report never creates a store
