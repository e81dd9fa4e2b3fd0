"""`kernelcraft report`: what a run (or a bench) found, in the terminal, as JSON, or as one HTML page; two of them
side by side. With --json the last line of stdout is one JSON object; progress goes to stderr."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernelcraft.cli.common import EXIT_OK, UsageError, add_store_arg, show, usage_errors

NAME = "report"


def add_parser(sub) -> None:
    rep = sub.add_parser(NAME, help="a run's, bench's or apply's report: tables, trajectory, fast_p; --html for a page")
    rep.add_argument("runs", nargs="+", metavar="RUN",
                     help="a run, bench or apply id (a unique prefix will do); give two runs or benches to compare "
                          "them")
    rep.add_argument("--html", type=Path, default=None, metavar="FILE", help="also write a self-contained HTML page")
    add_store_arg(rep)
    rep.add_argument("--json", action="store_true", help="the report as JSON, on the last line of stdout")


def run(args) -> int:
    from kernelcraft import api

    if len(args.runs) > 2:
        raise UsageError("kernelcraft report: give one RUN, or two to compare")
    if args.html is not None and args.html.is_dir():
        raise UsageError(f"kernelcraft report: --html {args.html} is a directory; name a file")
    path = api.store_path(args.store)
    with usage_errors(NAME):
        report = api.report(*args.runs, store=path)
    if args.html is not None:
        from kernelcraft.report.page import render

        page = render(report, str(path))
        try:
            args.html.parent.mkdir(parents=True, exist_ok=True)
            args.html.write_text(page, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"kernelcraft report: cannot write {args.html}: {exc.strerror or exc}") from None
        print(f"wrote {args.html} ({len(page.encode()) / 1024:.0f} KiB)", file=sys.stderr)
    if args.json:
        print(json.dumps(dict(report, html=str(args.html) if args.html else None)))
        return EXIT_OK
    from kernelcraft.report import terminal
    from kernelcraft.report.apply import apply_view

    view = {"run": terminal.report_view, "bench": terminal.bench_report_view,
            "apply": lambda r: apply_view(r["apply"])}.get(report["kind"], terminal.compare_view)
    show(view(report))
    return EXIT_OK
