"""benchmarks/results/index.json is what the records and supersessions.json say now (benchmarks/results_index.py),
and every successor it names is a record."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _index_module():
    spec = importlib.util.spec_from_file_location("results_index", REPO / "benchmarks" / "results_index.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_index_lists_every_record_as_it_is_now():
    index = _index_module()
    built = index.build()
    assert json.loads(index.INDEX.read_text()) == built, "run benchmarks/results_index.py"
    assert index.problems(built) == []
    files = {e["file"] for e in built["records"]}
    assert {p.name for p in index.RESULTS.iterdir() if p.is_file()} - files == index.NOT_RECORDS
    assert all(e["status"] in ("current", "superseded", "stale") and e["date"] for e in built["records"])


def test_a_record_is_read_for_its_device_date_and_commit_else_its_name(tmp_path):
    index = _index_module()
    (tmp_path / "probe-h200-2026-11-30.log").write_text("# at 59ede0a, NVIDIA H200\n")
    (tmp_path / "bench-h100-2026-11-24.json").write_text(json.dumps(
        {"device": "NVIDIA H100 80GB HBM3", "date": "2026-11-25", "code": "abc1234",
         "superseded_by": "bench-h100-2026-11-26.json (again)"}))
    table = {"probe-h200-2026-11-30.log": {"stale": "the code changed"}}
    log = index.describe(tmp_path / "probe-h200-2026-11-30.log", table)
    assert log == {"file": "probe-h200-2026-11-30.log", "kind": "log", "device": "NVIDIA H200", "date": "2026-11-30",
                   "code": "59ede0a", "status": "stale", "why": "the code changed"}
    record = index.describe(tmp_path / "bench-h100-2026-11-24.json", {})
    assert (record["device"], record["date"], record["code"]) == ("NVIDIA H100 80GB HBM3", "2026-11-25", "abc1234")
    assert record["status"] == "superseded" and record["superseded_by"] == "bench-h100-2026-11-26.json"
