"""`kernelcraft export`: training and analysis datasets from the run store (docs/export.md).

Like cli.py, this module prints; nothing it calls does. With --json the last line of stdout is one
JSON object; progress goes to stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernelcraft.cli import EXIT_OK, UsageError


def add_commands(sub) -> None:
    ex = sub.add_parser("export", help="datasets from the run store: sft chats, rl problems, search trajectories")
    ex.add_argument("paths", nargs="+", metavar="RUN… OUT",
                    help="run ids (a unique prefix will do) or bench ids, then the file to write (.jsonl or "
                         ".parquet); options may come before, between or after them")
    ex.set_defaults(trailing_positionals="paths")  # cli.main adds positionals given after options here
    ex.add_argument("--kind", required=True, choices=["sft", "rl", "trajectories"],
                    help="sft: chats behind correct, faster kernels; rl: one row per problem; "
                         "trajectories: every search step")
    ex.add_argument("--format", choices=["jsonl", "parquet"], default=None,
                    help="default: parquet for a .parquet OUT, else jsonl")
    ex.add_argument("--force", action="store_true", help="replace OUT if it exists")
    ex.add_argument("--store", type=Path, default=None, help="the run store (default ~/.kernelcraft/runs.db)")
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


def cmd_export(args) -> int:
    from kernelcraft.export import SCHEMAS, ExportError, Filters, build_rows, guess_format, resolve_runs, write_rows
    from kernelcraft.export.prompts import render_prompt
    from kernelcraft.propose.base import CATEGORIES
    from kernelcraft.store import Store, StoreError

    if len(args.paths) < 2:
        raise UsageError("kernelcraft export: give one or more RUNs, then OUT (the file to write)")
    args.runs, args.out = args.paths[:-1], args.paths[-1]
    filters = Filters(correct_only=args.correct_only, min_speedup=args.min_speedup, baseline=args.baseline,
                      statuses=tuple(args.status), categories=tuple(args.category), model=args.model)
    try:
        fmt = args.format or guess_format(args.out)
        filters.check(args.kind)
        unknown = [c for c in filters.categories if c not in CATEGORIES and c != "uncategorized"]
        if unknown:
            raise ExportError(f"--category {unknown[0]}: unknown; choose from {', '.join(CATEGORIES)}, uncategorized")
        out = Path(args.out)
        if out.exists() and not args.force:
            raise ExportError(f"{out} exists; pass --force to replace it")
        if args.store is not None and not Path(args.store).exists():
            raise ExportError(f"no run store at {args.store}")
        store = Store(args.store)
        try:
            runs = resolve_runs(store, args.runs)
            if not args.json:
                print(f"exporting {args.kind} from {len(runs)} run(s) in {store.path}…", file=sys.stderr)
            rows, stats = build_rows(store, runs, args.kind, filters, render_prompt)
        finally:
            store.close()
        path = write_rows(rows, SCHEMAS[args.kind], fmt, out, force=args.force)
    except (StoreError, ExportError) as exc:
        raise UsageError(f"kernelcraft export: {exc}") from None
    summary = {"kind": args.kind, "format": fmt, "path": str(path), "rows": len(rows), "runs": stats["runs"],
               "candidates_read": stats["candidates"], "duplicates_dropped": stats["duplicates"],
               "filters": filters.to_dict()}
    if args.json:
        print(json.dumps(summary))
        return EXIT_OK
    shown = ", ".join(f"{k}={v}" for k, v in summary["filters"].items()) or "none"
    print(f"wrote {summary['rows']} {args.kind} row(s) ({fmt}) to {path}\n"
          f"from {stats['runs']} run(s), {stats['candidates']} candidate(s) read; filters: {shown}"
          + (f"; {stats['duplicates']} duplicate chat(s) dropped" if stats["duplicates"] else ""))
    return EXIT_OK
