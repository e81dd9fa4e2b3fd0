"""Files: JSONL and Parquet through the kind's schema, read back by pyarrow (and `datasets` where
installed); written atomically, never over an existing file unless forced."""

from __future__ import annotations

import json
import os

import pyarrow.json as pj
import pyarrow.parquet as pq
import pytest

from kernelcraft.export.prompts import render_prompt
from kernelcraft.export import SCHEMAS, ExportError, Filters, build_rows, resolve_runs, write_rows

pytestmark = pytest.mark.slow

FILTERS = {"sft": Filters(min_speedup=0.0), "rl": Filters(), "trajectories": Filters()}


@pytest.fixture(scope="module")
def exported(runs):
    runs_ = resolve_runs(runs.store, [runs.bench_id, runs.tree, runs.refine])
    return {kind: build_rows(runs.store, runs_, kind, FILTERS[kind], render_prompt)[0] for kind in SCHEMAS}


@pytest.mark.parametrize("kind", list(SCHEMAS))
def test_rows_have_exactly_the_schema_fields(exported, kind):
    assert exported[kind], kind
    for row in exported[kind]:
        assert list(row) == SCHEMAS[kind].names


@pytest.mark.parametrize("kind", list(SCHEMAS))
@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_each_kind_in_each_format_reads_back(exported, kind, fmt, tmp_path):
    rows = exported[kind]
    path = write_rows(rows, SCHEMAS[kind], fmt, tmp_path / f"{kind}.{fmt}")
    table = pq.read_table(path) if fmt == "parquet" else pj.read_json(path)
    assert table.num_rows == len(rows)
    assert set(table.column_names) == set(SCHEMAS[kind].names)
    if fmt == "parquet":
        assert table.schema.equals(SCHEMAS[kind])
        assert table.to_pylist() == rows
    else:
        lines = path.read_text().splitlines()
        assert [json.loads(line) for line in lines] == rows
    first = table.slice(0, 1).to_pylist()[0]
    if kind == "rl":
        assert first["reward_model"]["style"] == "rule" and first["prompt"][0]["role"] == "system"
    elif kind == "sft":
        assert first["messages"][-1]["role"] == "assistant"
    else:
        assert isinstance(first["reasons"], list) and isinstance(first["correct"], bool)


@pytest.mark.parametrize("kind", list(SCHEMAS))
def test_an_empty_parquet_export_keeps_every_column_type(kind, tmp_path):
    path = write_rows([], SCHEMAS[kind], "parquet", tmp_path / "empty.parquet")
    table = pq.read_table(path)
    assert table.num_rows == 0 and table.schema.equals(SCHEMAS[kind])


def test_datasets_loads_both_formats(exported, tmp_path):
    datasets = pytest.importorskip("datasets")
    for kind in ("sft", "rl"):
        rows = exported[kind]
        jsonl = write_rows(rows, SCHEMAS[kind], "jsonl", tmp_path / f"{kind}.jsonl")
        parquet = write_rows(rows, SCHEMAS[kind], "parquet", tmp_path / f"{kind}.parquet")
        for loader, path in (("json", jsonl), ("parquet", parquet)):
            ds = datasets.load_dataset(loader, data_files=str(path), split="train",
                                       cache_dir=str(tmp_path / "hf-cache"))
            assert ds.num_rows == len(rows), (kind, loader)
            chat = ds[0]["messages" if kind == "sft" else "prompt"]
            assert chat[-1]["role"] == ("assistant" if kind == "sft" else "user")


def test_an_existing_file_is_kept_unless_forced_and_a_failed_write_loses_nothing(exported, tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text("precious\n")
    with pytest.raises(ExportError, match="exists; pass --force"):
        write_rows(exported["trajectories"], SCHEMAS["trajectories"], "jsonl", path)
    assert path.read_text() == "precious\n"
    bad = [dict(exported["trajectories"][0], round="first")]  # does not fit the schema
    with pytest.raises(Exception):
        write_rows(bad, SCHEMAS["trajectories"], "jsonl", path, force=True)
    assert path.read_text() == "precious\n"
    write_rows(exported["trajectories"], SCHEMAS["trajectories"], "jsonl", path, force=True)
    assert len(path.read_text().splitlines()) == len(exported["trajectories"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]  # no temp file left behind
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # an ordinary file, not the temp file's private mode
    with pytest.raises(ExportError, match="is a directory"):
        write_rows([], SCHEMAS["rl"], "jsonl", tmp_path, force=True)
