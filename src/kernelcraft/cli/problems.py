"""`kernelcraft problems list|show`: the built-in problem suite."""

from __future__ import annotations

import json
import sys

from kernelcraft.cli.common import EXIT_OK, Parser, UsageError, add_size_args, show, usage_errors

NAME = "problems"


def add_parser(sub) -> None:
    pr = sub.add_parser(NAME, help="the built-in problem suite")
    prsub = pr.add_subparsers(dest="action", parser_class=Parser)
    ls = prsub.add_parser("list", help="list the suite's problems")
    ls.add_argument("--level", type=int, default=None)
    ls.add_argument("--json", action="store_true")
    sh = prsub.add_parser("show", help="a problem's source, sizes, FLOPs and bytes")
    sh.add_argument("name")
    sh.add_argument("--small", action="store_true",
                    help="at its small sizes: SMALL_SIZES, else sizes derived from its cost")
    add_size_args(sh, size=False)
    sh.add_argument("--json", action="store_true")


def run(args) -> int:
    from kernelcraft import api

    if args.action == "list":
        with usage_errors("problems"):
            rows = api.problems(args.level)
        if args.json:
            print(json.dumps(rows))
        else:
            from kernelcraft.report.terminal import problem_list_view

            show(problem_list_view(rows))
        return EXIT_OK
    if args.action == "show":
        with usage_errors("problems show"):
            info = api.problem_info(args.name, small=args.small, sizes=args.sizes)
        if args.json:
            print(json.dumps(info))
        else:
            from kernelcraft.report.terminal import problem_view

            show(problem_view(info))
            if not args.small and not _has_gpu():  # what eval and run would time here is not what is shown
                print("note: this machine has no GPU: eval and run take the problem's small sizes here "
                      "(--size auto); `kernelcraft problems show --small` shows those", file=sys.stderr)
        return EXIT_OK
    raise UsageError("kernelcraft problems: choose list or show")


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()
