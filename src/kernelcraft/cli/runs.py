"""`kernelcraft runs list|show`: the run store's runs; one run with its candidates, or one candidate's source."""

from __future__ import annotations

import json

from kernelcraft.cli.common import EXIT_OK, Parser, UsageError, add_store_arg, print_run, show, usage_errors, whole

NAME = "runs"


def add_parser(sub) -> None:
    runs = sub.add_parser(NAME, help="the run store: list runs, show one")
    rsub = runs.add_subparsers(dest="action", parser_class=Parser)
    ls = rsub.add_parser("list", help="the latest runs")
    ls.add_argument("--limit", type=whole(1), default=30)
    add_store_arg(ls)
    ls.add_argument("--json", action="store_true")
    sh = rsub.add_parser("show", help="one run: its best kernel by round, its candidates (key, round, status, time, "
                                      "speedup, idea) and the best kernel; --source KEY prints a candidate's source")
    sh.add_argument("run", help="a run id (a unique prefix will do)")
    sh.add_argument("--source", metavar="KEY", default=None,
                    help="print the source of this candidate (its key, e.g. r01/i00/m00, as the table lists) "
                         "instead of the run")
    add_store_arg(sh)
    sh.add_argument("--json", action="store_true",
                    help="the run as JSON (its candidates included), or with --source the candidate and its source")


def run(args) -> int:
    from kernelcraft import api

    if args.action not in ("list", "show"):
        raise UsageError("kernelcraft runs: choose list or show")
    with usage_errors(NAME):
        if args.action == "list":
            rows = api.runs(store=args.store, limit=args.limit)
        elif args.source is not None:
            candidate = api.candidate(args.run, args.source, store=args.store)
        else:
            summary = api.run_summary(args.run, store=args.store)
    if args.action == "list":
        if args.json:
            print(json.dumps(rows))
        else:
            from kernelcraft.report.terminal import runs_view

            show(runs_view(rows))
    elif args.source is not None:
        if args.json:
            print(json.dumps(candidate))
        else:  # the source alone, so that it can be redirected into a file and run
            print(candidate["source"], end="" if candidate["source"].endswith("\n") else "\n")
    elif args.json:
        print_run(summary, as_json=True)
    else:
        from rich.console import Group

        from kernelcraft.report.terminal import candidates_view, run_view

        show(Group(run_view(summary), candidates_view(summary.candidates)))
    return EXIT_OK
