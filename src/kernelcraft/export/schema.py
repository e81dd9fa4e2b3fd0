"""The column layout of each dataset kind, as pyarrow schemas: Parquet files are written with them (so a
column's type never depends on which rows happen to be exported, an empty export included) and JSONL
rows are passed through them, so both formats carry the same fields. docs/export.md explains each one."""

from __future__ import annotations

import pyarrow as pa

MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
POLICY = pa.struct([("name", pa.string()), ("fp32", pa.float64()), ("fp16_bf16", pa.float64()),
                    ("allow_tf32", pa.bool_())])

_PROVENANCE = [
    ("run_id", pa.string()),
    ("bench_id", pa.string()),
    ("apply_id", pa.string()),
    ("problem", pa.string()),
    ("strategy", pa.string()),
    ("model", pa.string()),
    ("candidate_id", pa.int64()),
    ("step_key", pa.string()),
    ("round", pa.int64()),
    ("backend", pa.string()),
    ("policy", pa.string()),
    ("device", pa.string()),
    ("idea", pa.string()),
    ("category", pa.string()),
]
_TIMES = [
    ("runtime_ms", pa.float64()),
    ("eager_ms", pa.float64()),
    ("compile_ms", pa.float64()),
    ("speedup_eager", pa.float64()),
    ("speedup_compile", pa.float64()),
]
_USAGE = [
    ("input_tokens", pa.int64()),
    ("output_tokens", pa.int64()),
    ("cost", pa.float64()),
]

SFT = pa.schema([("messages", MESSAGES), ("prompt_origin", pa.string()), *_PROVENANCE, ("call_kind", pa.string()),
                 *_TIMES,
                 ("source", pa.string()), *_USAGE])

TRAJECTORIES = pa.schema([
    *_PROVENANCE,
    ("origin", pa.string()),
    ("parent_id", pa.int64()),
    ("parent_key", pa.string()),
    ("parent_status", pa.string()),
    ("parent_runtime_ms", pa.float64()),
    ("parent_speedup_eager", pa.float64()),
    ("source", pa.string()),
    ("status", pa.string()),
    ("correct", pa.bool_()),
    ("duplicate", pa.bool_()),
    *_TIMES,
    ("max_rel_error", pa.float64()),
    ("reasons", pa.list_(pa.string())),
    ("message", pa.string()),
    ("parse_error", pa.string()),
    ("call_kind", pa.string()),
    *_USAGE,
    ("call_seconds", pa.float64()),
])

EXTRA_INFO = pa.struct([
    ("index", pa.int64()),
    ("problem", pa.string()),
    ("problem_sha", pa.string()),
    ("backend", pa.string()),
    ("device", pa.string()),
    ("device_name", pa.string()),
    ("policy", POLICY),
    ("small", pa.bool_()),
    ("trials", pa.int64()),
    ("timing_method", pa.string()),
    ("timing_budget_s", pa.float64()),
    ("compile_baseline", pa.bool_()),
    ("eager_ms", pa.float64()),
    ("compile_ms", pa.float64()),
    ("best_runtime_ms", pa.float64()),
    ("best_speedup_eager", pa.float64()),
    ("best_speedup_compile", pa.float64()),
    ("best_source", pa.string()),
    ("runs", pa.list_(pa.string())),
    ("candidates", pa.int64()),
    ("correct_candidates", pa.int64()),
    ("prompt_origin", pa.string()),
])

RL = pa.schema([
    ("data_source", pa.string()),
    ("prompt", MESSAGES),
    ("ability", pa.string()),
    ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
    ("extra_info", EXTRA_INFO),
])

SCHEMAS = {"sft": SFT, "rl": RL, "trajectories": TRAJECTORIES}
