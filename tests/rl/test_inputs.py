"""Completions paired with the rows they answer; bad files said in one line."""

from __future__ import annotations

import json

import pytest

from kernelcraft.errors import ConfigError
from kernelcraft.rl.inputs import pair, read_completions, read_rows
from tests.rl.conftest import row


def test_completions_name_their_row_by_index_or_problem(tmp_path):
    rows = [row("level1/relu", 0), row("level1/sigmoid", 1)]
    pairs = pair(rows, [{"row": 1, "completion": "a"}, {"problem": "level1/relu", "completion": "b"}])
    assert [(r["extra_info"]["problem"], c) for r, c in pairs] == [("level1/sigmoid", "a"), ("level1/relu", "b")]
    assert pair(rows[:1], [{"completion": "c"}])[0][0] is rows[0]
    with pytest.raises(ConfigError, match="completions:1: no row with index 7"):
        pair(rows, [{"row": 7, "completion": "a"}])
    with pytest.raises(ConfigError, match="say which row"):
        pair(rows, [{"completion": "a"}])
    with pytest.raises(ConfigError, match="names 2 rows"):
        pair(rows + [row("level1/relu", 2)], [{"problem": "level1/relu", "completion": "a"}])


def test_bad_files_are_named_with_their_line(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(row("level1/relu")) + "\n{not json\n")
    with pytest.raises(ConfigError, match="rows.jsonl:2: not a JSON row"):
        read_rows(rows)
    rows.write_text(json.dumps({"data_source": "gsm8k"}) + "\n")
    with pytest.raises(ConfigError, match="rows.jsonl:1: not an RL row"):
        read_rows(rows)
    comps = tmp_path / "c.jsonl"
    comps.write_text(json.dumps({"row": 0}) + "\n")
    with pytest.raises(ConfigError, match="c.jsonl:1: a completion is an object"):
        read_completions(comps)
    with pytest.raises(ConfigError, match="no completions file"):
        read_completions(tmp_path / "missing.jsonl")
