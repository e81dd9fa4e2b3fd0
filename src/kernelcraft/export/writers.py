"""Writing rows out: JSONL (one JSON object a line) or Parquet, through the kind's schema, atomically
(a temp file beside the target, renamed over it once complete: a failed export leaves no partial file and
loses nothing that was there)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kernelcraft.export.select import ExportError
from kernelcraft.result import json_safe

FORMATS = ("jsonl", "parquet")


SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl"}


def guess_format(path: str | Path) -> str:
    """The format a file name asks for (.parquet/.pq, .jsonl/.json/.ndjson); any other name is an ExportError
    naming --format, rather than a file of a format its name does not say."""
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise ExportError(f"{path}: cannot tell the format from {suffix or 'a name with no suffix'}; name it "
                          ".jsonl or .parquet, or pass --format jsonl|parquet")
    return SUFFIXES[suffix]


def to_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """The rows as a table of exactly `schema` (a row that does not fit raises here, before any file is touched)."""
    return pa.Table.from_pylist([json_safe(r) for r in rows], schema=schema)


def write_rows(rows: list[dict], schema: pa.Schema, fmt: str, path: str | Path, force: bool = False) -> Path:
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    path = Path(path)
    if path.is_dir():
        raise ExportError(f"{path} is a directory; OUT is a file")
    if path.exists() and not force:
        raise ExportError(f"{path} exists; pass --force to replace it")
    table = to_table(rows, schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            if fmt == "parquet":
                pq.write_table(table, f)
            else:
                for row in table.to_pylist():
                    f.write(json.dumps(row, ensure_ascii=False).encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's file is private; the export is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
