"""`kernelcraft bench SUITE`: one run per problem with the same strategy and proposer, then fast_p. With --json
the last line of stdout is one JSON object; the progress line goes to stderr."""

from __future__ import annotations

import json
import sys

from kernelcraft.cli.common import EXIT_OK, add_search_args, exit_status, search_options, show, usage_errors, whole

NAME = "bench"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="run a strategy over many problems and report fast_p")
    p.add_argument("suite", help="level1, level2, level3, all, a directory of problem files, or a file")
    p.add_argument("--only", default="", help="comma-separated problem names (or name fragments) to keep")
    p.add_argument("--limit", type=whole(1), default=None,
                   help="the first N problems (by their numbers: 1, 2, … 10, not 1, 10, 100)")
    p.add_argument("--runs-at-once", type=whole(1), default=None, metavar="N",
                   help="runs going together (default: three per GPU, one per device on the CPU or with "
                        "--max-minutes: a run queued behind another's candidates would spend its minutes)")
    add_search_args(p)


def run(args) -> int:
    from kernelcraft import api
    from kernelcraft.cli.progress import Progress

    progress = Progress()  # on stderr, --json or not: stdout holds the summary alone
    with usage_errors(NAME):
        prepared = api.prepare_bench(args.suite, only=args.only, limit=args.limit, store=args.store,
                                     out_dir=args.out, on_event=progress.event, runs_at_once=args.runs_at_once,
                                     **search_options(args))
    with progress:
        summary = prepared.run(progress.event)
    if args.json:
        print(json.dumps(summary))
    else:
        from kernelcraft.report.terminal import bench_view

        show(bench_view(summary))
    stopped = [r for r in summary["rows"] if r.get("error")]
    if stopped:  # the bench stops at a refusal (every problem would meet it); a run whose calls kept failing does not
        worst = max(stopped, key=lambda r: exit_status(r["status"], r["stop_reason"]))
        more = f" ({len(stopped)} runs stopped so)" if len(stopped) > 1 else ""
        print(f"kernelcraft bench: {worst['problem']}: {worst['error']}{more}", file=sys.stderr)
        return exit_status(worst["status"], worst["stop_reason"])
    return EXIT_OK
