"""Datasets from the run store (docs/export.md has every field):

- `sft`: the chat (request messages, then the answer) behind each correct candidate faster than PyTorch;
- `rl`: one row per problem: the prompt, the reference as ground truth, the verifier's settings;
- `trajectories`: every parent → idea → candidate → result step of the search.
"""

from __future__ import annotations

import json

from kernelcraft.export.rl import RenderPrompt, rl_rows
from kernelcraft.export.schema import SCHEMAS
from kernelcraft.export.select import BASELINES, KINDS, STATUSES, ExportError, Filters, resolve_runs
from kernelcraft.export.steps import public, run_steps, sft_row
from kernelcraft.export.writers import FORMATS, guess_format, to_table, write_rows
from kernelcraft.records import RunRecord
from kernelcraft.store import Store


def build_rows(store: Store, runs: list[RunRecord], kind: str, filters: Filters | None = None,
               render_prompt: RenderPrompt | None = None) -> tuple[list[dict], dict]:
    """The rows of `kind` for `runs`, filtered; and counts of what was read and left out."""
    filters = filters or Filters()
    filters.check(kind)
    runs = [r for r in runs if filters.keeps_run(r)]
    stats = {"runs": len(runs), "candidates": 0, "duplicates": 0}
    if kind == "rl":
        rows = rl_rows(store, runs, render_prompt)
        stats["candidates"] = sum(r["extra_info"]["candidates"] for r in rows)
        return rows, stats
    rows, seen = [], set()
    for run in runs:
        for step in run_steps(store, run):
            stats["candidates"] += 1
            if not filters.keeps(step, kind):
                continue
            if kind == "trajectories":
                rows.append(public(step))
                continue
            row = sft_row(step, render_prompt)
            if row is None:
                continue
            chat = json.dumps(row["messages"])  # one example per distinct chat (the same request, answered alike)
            if chat in seen:
                stats["duplicates"] += 1
                continue
            seen.add(chat)
            rows.append(row)
    return rows, stats


__all__ = ["BASELINES", "FORMATS", "KINDS", "SCHEMAS", "STATUSES", "ExportError", "Filters", "RenderPrompt",
           "build_rows", "guess_format", "resolve_runs", "to_table", "write_rows"]
