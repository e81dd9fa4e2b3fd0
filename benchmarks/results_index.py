"""The index of benchmarks/results/: one entry per record (device, date, code commit, whether it is current), built
from the records themselves and from supersessions.json, the table of records replaced or made stale since.

    python benchmarks/results_index.py            # writes benchmarks/results/index.json
    python benchmarks/results_index.py --check    # exits 1 where index.json is not what the records say now

Where a record does not say its device, date or commit in its own fields (`device`, `date`, `code` or `commit`; a
log's first lines), its file name does (`…-h200-2026-11-30.json`); what neither says is null. A record is
`superseded` where a later one replaces it (its own `superseded_by` field, or the table's), `stale` where the code
under it changed and nothing measured it again (the table's `stale`, with why), else `current`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
INDEX = RESULTS / "index.json"
TABLE = RESULTS / "supersessions.json"
NOT_RECORDS = {"README.md", "HISTORY.md", "index.json", "supersessions.json"}

_DEVICES = {"h100": "NVIDIA H100", "h200": "NVIDIA H200", "h200x2": "2x NVIDIA H200", "h200x4": "4x NVIDIA H200",
            "cpu": "CPU"}
_DEVICE_IN_NAME = re.compile(r"-(h100|h200x4|h200x2|h200|cpu)(?=-|\.)")
_DATE = re.compile(r"(\d{4}-\d{2}-\d{2})")
_CODE_IN_TEXT = re.compile(r"\b(?:code|commit|at)[: ]+([0-9a-f]{7,40})\b")


def _target(text: str | None) -> str | None:
    """The record a `superseded_by` names: its first word (a note in parentheses may follow)."""
    return text.split()[0] if text else None


def describe(path: Path, table: dict) -> dict:
    """One record's entry."""
    fields: dict = {}
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError:
            data = None
        fields = data if isinstance(data, dict) else {}
    head = "" if path.suffix == ".json" else "\n".join(path.read_text(errors="replace").splitlines()[:5])
    named = _DEVICE_IN_NAME.search(path.name)
    dated = _DATE.search(path.name)
    code = fields.get("code", fields.get("commit"))
    if code is None and head:
        found = _CODE_IN_TEXT.search(head)
        code = found.group(1) if found else None
    row = table.get(path.name, {})
    superseded_by = _target(fields.get("superseded_by")) or row.get("superseded_by")
    status = "superseded" if superseded_by else "stale" if row.get("stale") else "current"
    entry = {"file": path.name, "kind": path.suffix.lstrip("."),
             "device": fields.get("device") or (_DEVICES[named.group(1)] if named else None),
             "date": fields.get("date") or (dated.group(1) if dated else None),
             "code": code if isinstance(code, (str, dict)) else None, "status": status}
    if superseded_by:
        entry["superseded_by"] = superseded_by
    if row.get("why") or row.get("stale"):
        entry["why"] = row.get("why") or row.get("stale")
    return entry


def build() -> dict:
    table = json.loads(TABLE.read_text())["records"]
    records = sorted(p for p in RESULTS.iterdir() if p.is_file() and p.name not in NOT_RECORDS)
    entries = [describe(p, table) for p in records]
    return {"what": "every record under benchmarks/results/, as benchmarks/results_index.py reads it",
            "counts": {s: sum(e["status"] == s for e in entries) for s in ("current", "superseded", "stale")},
            "records": entries}


def problems(index: dict) -> list[str]:
    """What is wrong with the table or the records: a row for no record, a successor that is not one."""
    names = {e["file"] for e in index["records"]}
    table = json.loads(TABLE.read_text())["records"]
    found = [f"supersessions.json names {name}, which is not a record" for name in table if name not in names]
    found += [f"{e['file']} is superseded by {e['superseded_by']}, which is not a record"
              for e in index["records"] if e.get("superseded_by") and e["superseded_by"] not in names]
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with index.json instead of writing it")
    args = ap.parse_args()
    index = build()
    wrong = problems(index)
    for line in wrong:
        print(line, file=sys.stderr)
    text = json.dumps(index, indent=1) + "\n"
    if args.check:
        stale = not INDEX.exists() or INDEX.read_text() != text
        if stale:
            print("benchmarks/results/index.json is not what the records say: run benchmarks/results_index.py",
                  file=sys.stderr)
        return 1 if stale or wrong else 0
    INDEX.write_text(text)
    print(f"{len(index['records'])} records: {index['counts']}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
