"""Files a script scores: RL rows (JSONL or Parquet, as `kernelcraft export --kind rl` writes them) and
completions (JSONL: one object a line, `completion` the model's answer and `row` or `problem` saying which row it
answers). Bad input is a ConfigError whose one line names the file and line."""

from __future__ import annotations

import json
from pathlib import Path

from kernelcraft.errors import ConfigError
from kernelcraft.export.rl import DATA_SOURCE


def read_rows(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no rows file at {path}")
    if path.suffix in (".parquet", ".pq"):
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ConfigError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow), or give JSONL") from None
        rows = pq.read_table(path).to_pylist()
    else:
        rows = _jsonl(path, "row")
    for i, row in enumerate(rows, 1):
        if not isinstance(row, dict) or row.get("data_source") != DATA_SOURCE \
                or not isinstance((row.get("reward_model") or {}).get("ground_truth"), str):
            raise ConfigError(f"{path}:{i}: not an RL row of kernelcraft's (data_source {DATA_SOURCE!r}, "
                              "reward_model.ground_truth): write rows with `kernelcraft export --kind rl`")
    if not rows:
        raise ConfigError(f"{path}: no rows")
    return rows


def read_completions(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no completions file at {path}")
    items = _jsonl(path, "completion")
    for i, item in enumerate(items, 1):
        if not isinstance(item, dict) or not isinstance(item.get("completion"), str):
            raise ConfigError(f"{path}:{i}: a completion is an object with \"completion\" (the answer's text) and "
                              "\"row\" (the row's extra_info.index) or \"problem\" (its name)")
    return items


def pair(rows: list[dict], completions: list[dict], where: str = "completions") -> list[tuple[dict, str]]:
    """Each completion with the row it answers: by `row` (the row's extra_info.index, else its place in the
    file), by `problem` (a name only one row has), or the only row there is."""
    by_index = {}
    for place, row in enumerate(rows):
        index = (row.get("extra_info") or {}).get("index")
        by_index[int(index) if index is not None else place] = row
    by_problem: dict[str, list[dict]] = {}
    for row in rows:
        by_problem.setdefault((row.get("extra_info") or {}).get("problem"), []).append(row)
    out = []
    for i, item in enumerate(completions, 1):
        if "row" in item:
            row = by_index.get(item["row"]) if isinstance(item["row"], int) else None
            if row is None:
                raise ConfigError(f"{where}:{i}: no row with index {item['row']!r} (there are {len(rows)})")
        elif "problem" in item:
            matches = by_problem.get(item["problem"], [])
            if len(matches) != 1:
                raise ConfigError(f"{where}:{i}: problem {item['problem']!r} names {len(matches)} rows; "
                                  "say which with \"row\"" if matches else
                                  f"{where}:{i}: no row for problem {item['problem']!r}")
            row = matches[0]
        elif len(rows) == 1:
            row = rows[0]
        else:
            raise ConfigError(f"{where}:{i}: say which row the completion answers (\"row\" or \"problem\")")
        out.append((row, item["completion"]))
    return out


def _jsonl(path: Path, what: str) -> list:
    items = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text (one JSON object a line)") from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{i}: not a JSON {what} ({exc.msg})") from None
    return items
