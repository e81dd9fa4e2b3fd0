"""`kernelcraft export`: training and analysis datasets from the run store (docs/export.md). With --json the
last line of stdout is one JSON object; progress goes to stderr."""

from __future__ import annotations

import json
import sys

from kernelcraft.cli.common import EXIT_OK, UsageError, add_store_arg, usage_errors

NAME = "export"


def add_parser(sub) -> None:
    ex = sub.add_parser(NAME, help="datasets from the run store: sft chats, rl problems, search trajectories")
    ex.add_argument("paths", nargs="+", metavar="RUN… OUT",
                    help="run, bench or apply ids (a unique prefix will do), then the file to write (.jsonl or "
                         ".parquet); options may come before, between or after them")
    ex.set_defaults(trailing_positionals="paths")  # app.main adds positionals given after options here
    ex.add_argument("--kind", required=True, choices=["sft", "rl", "trajectories"],
                    help="sft: chats behind correct, faster kernels; rl: one row per problem; "
                         "trajectories: every search step")
    ex.add_argument("--format", choices=["jsonl", "parquet"], default=None,
                    help="default: parquet for a .parquet OUT, else jsonl")
    ex.add_argument("--force", action="store_true", help="replace OUT if it exists")
    add_store_arg(ex)
    ex.add_argument("--json", action="store_true", help="the summary as JSON, on the last line of stdout")
    f = ex.add_argument_group("filters (sft and trajectories; rl takes --model only)")
    f.add_argument("--correct-only", action="store_true", help="only candidates the verifier found correct")
    f.add_argument("--min-speedup", type=float, default=None, metavar="P",
                   help="only correct candidates at least P times faster than the baseline "
                        "(sft default: faster, P > 1)")
    f.add_argument("--baseline", choices=["eager", "compile"], default="eager",
                   help="what --min-speedup (and sft's 'faster') compares against (default eager)")
    f.add_argument("--status", action="append", default=[], metavar="S",
                   help="trajectories: only this status (ok, incorrect, rejected, compile_error, runtime_error, "
                        "timeout, call_failed, malformed, not_evaluated); repeat for more")
    f.add_argument("--category", action="append", default=[], metavar="C",
                   help="only candidates realizing an idea of this category (memory, async, precision, compute, "
                        "parallelism, control); repeat for more")
    f.add_argument("--model", default=None, help="only runs of this proposer (openai/o3, o3, builtin, …)")


def run(args) -> int:
    from kernelcraft import api

    def say(kind: str, info: dict) -> None:
        if not args.json:
            print(f"exporting {info['kind']} from {info['runs']} run(s) in {info['store']}…", file=sys.stderr)

    if len(args.paths) < 2:
        raise UsageError("kernelcraft export: give one or more RUNs, then OUT (the file to write)")
    args.runs, args.out = args.paths[:-1], args.paths[-1]
    with usage_errors(NAME):
        exported = api.export(args.runs, args.kind, store=args.store, out=args.out, format=args.format,
                              force=args.force, correct_only=args.correct_only, min_speedup=args.min_speedup,
                              baseline=args.baseline, statuses=args.status, categories=args.category,
                              model=args.model, on_event=say)
    summary, stats, fmt, path = exported.summary(), exported.stats, exported.format, exported.path
    if args.json:
        print(json.dumps(summary))
        return EXIT_OK
    shown = ", ".join(f"{k}={v}" for k, v in summary["filters"].items()) or "none"
    print(f"wrote {summary['rows']} {args.kind} row(s) ({fmt}) to {path}\n"
          f"from {stats['runs']} run(s), {stats['candidates']} candidate(s) read; filters: {shown}"
          + (f"; {stats['duplicates']} duplicate chat(s) dropped" if stats["duplicates"] else ""))
    if not summary["rows"] and stats["candidates"]:
        print(_why_none(args.kind, args.min_speedup, args.baseline), file=sys.stderr)
    return EXIT_OK


def _why_none(kind: str, min_speedup: float | None, baseline: str) -> str:
    """Why an export of candidates that were read wrote no row, and what keeps more."""
    if kind == "sft" and min_speedup is None:
        return (f"no row: sft keeps correct kernels faster than {baseline} beyond the timing noise, and none of these "
                "was; --min-speedup 0 keeps every correct one")
    return "no row: no candidate passed the filters above; loosen them to keep more"

