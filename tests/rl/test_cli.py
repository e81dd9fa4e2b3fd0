"""`kernelcraft rl score` end to end: rows as export writes them, completions in JSONL, one JSON object out."""

from __future__ import annotations

import json

import pytest

from kernelcraft.cli import main
from kernelcraft.export import SCHEMAS, write_rows
from tests.rl.conftest import answer, kernel, row

pytestmark = pytest.mark.slow


def test_score_completions_from_files(tmp_path, capsys):
    rows = tmp_path / "rows.jsonl"
    write_rows([row("level1/relu", 0, trials=2), row("level1/sigmoid", 1, trials=2)], SCHEMAS["rl"], "jsonl", rows)
    comps = tmp_path / "completions.jsonl"
    comps.write_text("".join(json.dumps(c) + "\n" for c in [
        {"row": 0, "completion": answer(kernel("level1/relu"))},
        {"problem": "level1/sigmoid", "completion": answer(kernel("level1/sigmoid", wrong=True))},
        {"row": 1, "completion": "no kernel"}]))
    out = tmp_path / "scores.jsonl"
    assert main(["rl", "score", str(rows), str(comps), "--cache-dir", str(tmp_path / "cache"), "--json",
                 "--shape", "min_speedup=1e-6,speed_weight=0.05", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    got = json.loads(captured.out.strip().splitlines()[-1])
    assert [s["tier"] for s in got["scores"]] == ["correct", "wrong", "malformed"]
    assert got["stats"]["completions"] == 3 and got["stats"]["verified"] == 2 and got["stats"]["per_minute"] > 0
    assert "scoring 3 completion(s) against 2 row(s)" in captured.err and "3/3 scored" in captured.err
    assert [json.loads(line)["tier"] for line in out.read_text().splitlines()] == ["correct", "wrong", "malformed"]


def test_bad_input_is_one_line_and_exit_status_2(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KERNELCRAFT_CLUSTER", raising=False)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(row("level1/relu")) + "\n")
    comps = tmp_path / "c.jsonl"
    comps.write_text('{"row": 3, "completion": "x"}\n')
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"row": 0, "completion": answer(kernel("level1/relu"))}) + "\n")
    for argv, said in ((["rl", "score", str(rows), str(comps)], "no row with index 3"),
                       (["rl", "score", str(rows), str(tmp_path / "none.jsonl")], "no completions file"),
                       (["rl", "score", str(rows), str(comps), "--shape", "wrong=9"], "reward shape: need"),
                       (["rl", "score", str(rows), str(comps), "--shape", "oops"], "give NAME=VALUE"),
                       (["rl", "score", str(rows), str(good), "--actors", "2"], "verifier actors run on a cluster"),
                       (["rl", "score", str(rows), str(good), "--cluster", "127.0.0.1:9"], "nothing answers at")):
        assert main(argv) == 2
        err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("scoring ")]
        assert len(err) == 1 and err[0].startswith("kernelcraft rl score") and said in err[0], err
