"""`kernelcraft …`: the command line. The only module that prints.

Exit status: 0 when the command ran (whatever the verdict), 2 on bad usage or an unreadable file
(one line on stderr), 1 on an internal failure; `run` and `bench` exit 3 when the model endpoint refused
their requests (bad key, unknown model: HTTP 401/403/404/400) and 4 when its calls kept failing after
their retries (HTTP 5xx, timeouts), each with one line on stderr naming the model, the status and the
provider's message.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_REFUSED, EXIT_FAILING = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM (128 + SIGINT, as shells report it)


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit status 2, as for every other usage error
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kernelcraft", description="Turn a PyTorch program into faster, verified GPU kernels.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    ev = sub.add_parser("eval", help="verify and time one candidate against a problem")
    add_target_args(ev, "auto", "cpu, cuda, cuda:N or auto (default: a GPU if there is one)")
    ev.add_argument("--trials", type=int, default=6, help="correctness trials, each with fresh secret seeds")
    ev.add_argument("--no-compile-baseline", action="store_true", help="skip timing torch.compile")
    ev.add_argument("--allow-library", action=argparse.BooleanOptionalAction, default=True,
                    help="library (ATen, cuBLAS, cuDNN) kernels may run beside the candidate's own (default: yes; "
                         "a candidate with no kernel of its own is rejected either way)")
    ev.add_argument("--sanity-bound", type=float, default=10.0,
                    help="flag speedups over eager beyond this for review (default 10)")
    ev.add_argument("--budget", type=float, default=6.0, help="seconds of timing per candidate, at most")

    pr = sub.add_parser("problems", help="the built-in problem suite")
    prsub = pr.add_subparsers(dest="action", parser_class=_Parser)
    ls = prsub.add_parser("list", help="list the suite's problems")
    ls.add_argument("--level", type=int, default=None)
    ls.add_argument("--json", action="store_true")
    show = prsub.add_parser("show", help="a problem's source, sizes, FLOPs and bytes")
    show.add_argument("name")
    show.add_argument("--small", action="store_true",
                      help="at its small sizes: SMALL_SIZES, else sizes derived from its cost")
    show.add_argument("--sizes", default=None, metavar="NAME=N,…", help="set module-level size constants")
    show.add_argument("--json", action="store_true")
    from kernelcraft import cli_export, cli_profile, cli_report, cli_search

    cli_profile.add_commands(sub)
    cli_search.add_commands(sub)
    cli_report.add_commands(sub)
    cli_export.add_commands(sub)
    from kernelcraft.mcp import add_arguments as mcp_arguments  # the server lives in kernelcraft.mcp

    mcp_arguments(sub.add_parser("mcp", help="serve kernelcraft's tools to coding agents (MCP; stdio, or --http)"))
    return parser


def add_target_args(p, device_default: str, device_help: str) -> None:
    """The arguments naming what to run, shared by `eval` and `profile`: problem, candidate, device, policy,
    backend, sizes, cache, JSON output."""
    p.add_argument("problem", help="a KernelBench-format file, or a suite name such as level1/softmax")
    p.add_argument("candidate", help="a file defining ModelNew, or example:NAME for a bundled one")
    p.add_argument("--device", default=device_default, help=device_help)
    p.add_argument("--policy", default="strict", choices=["strict", "relaxed"])
    p.add_argument("--backend", default="", help="cuda_nvrtc, cuda_inline, triton, cpp (default: detected)")
    p.add_argument("--size", default="auto", choices=["auto", "full", "small"],
                   help="problem sizes: full, or small (the problem's SMALL_SIZES, else sizes derived from its cost "
                        "to fit a CPU); auto = full on a GPU, small on the CPU")
    p.add_argument("--sizes", default=None, metavar="NAME=N,…",
                   help="set the problem's module-level size constants, e.g. batch_size=16,dim=4096 or "
                        "input_shape=(128,4096), on top of --size")
    p.add_argument("--cache-dir", type=Path, default=None, help="builds and baselines (default ~/.cache/kernelcraft)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")


def load_target(args, resolve_device):
    """(problem, candidate, device, sizes) as `args` name them, in that order (the first bad one is the error
    said), `resolve_device()` giving the device; the problem loaded at the sizes it runs at there, so one that
    does not import, or a --sizes name it does not define, is said now (ValueError and kin)."""
    from kernelcraft.candidate import Candidate
    from kernelcraft.problems import load_problem
    from kernelcraft.problems.sizes import parse_sizes, resolve_sizes

    problem = load_problem(args.problem)
    candidate = Candidate.from_file(args.candidate, args.backend)
    device = resolve_device()
    overrides = parse_sizes(args.sizes) if args.sizes else None
    sizes = resolve_sizes(problem, args.size, device.split(":")[0], overrides)
    problem.load(sizes=sizes)
    return problem, candidate, device, sizes


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        trailing = getattr(args, "trailing_positionals", None)  # `export A --kind sft B OUT`: B and OUT land here
        if extra and trailing and not any(e.startswith("-") for e in extra):
            getattr(args, trailing).extend(extra)
        elif extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if args.version:
            from kernelcraft import __version__

            print(__version__)
            return EXIT_OK
        if args.command == "eval":
            return cmd_eval(args)
        if args.command == "problems":
            return cmd_problems(args)
        if args.command == "profile":
            from kernelcraft.cli_profile import cmd_profile

            return cmd_profile(args)
        if args.command in ("run", "bench", "runs"):
            from kernelcraft import cli_search

            return getattr(cli_search, f"cmd_{args.command}")(args)
        if args.command == "report":
            from kernelcraft.cli_report import cmd_report

            return cmd_report(args)
        if args.command == "export":
            from kernelcraft.cli_export import cmd_export

            return cmd_export(args)
        if args.command == "mcp":
            from kernelcraft.mcp import serve

            return serve(args.store, args.device, args.http, args.cache_dir)
        raise UsageError("kernelcraft: choose a command: run, bench, runs, report, export, eval, profile, problems "
                         "(kernelcraft --help lists them)")
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        print("kernelcraft: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _console(stderr: bool = False):
    """Rich's console (on stderr for progress); piped or redirected output (no terminal to measure, no COLUMNS)
    is laid out 160 wide rather than rich's 80, so tables keep their columns and lines are not broken."""
    from rich.console import Console

    console = Console(stderr=stderr)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=stderr, width=160)
    return console


def _usage_errors():
    from kernelcraft.candidate import CandidateError
    from kernelcraft.problems import ProblemError

    return (ProblemError, CandidateError, ValueError)


def _say_waits(kind: str, info: dict) -> None:
    if kind == "lock_wait":
        print(f"{info['device']}: {info['message']}", file=sys.stderr)


def cmd_eval(args) -> int:
    from kernelcraft import api

    try:
        evaluation = api.prepare_evaluation(
            args.problem, args.candidate, device=args.device, policy=args.policy, size=args.size, sizes=args.sizes,
            backend=args.backend, trials=args.trials, compile_baseline=not args.no_compile_baseline,
            allow_library=args.allow_library, sanity_bound=args.sanity_bound, timing_budget=args.budget,
            cache_dir=args.cache_dir, on_event=None if args.json else _say_waits)
    except _usage_errors() as exc:
        raise UsageError(f"kernelcraft eval: {exc}") from None
    problem, candidate, sizes, verifier = (evaluation.problem, evaluation.candidate, evaluation.sizes,
                                           evaluation.verifier)
    if not args.json:
        print(f"evaluating {candidate.name} ({candidate.backend}) on {problem.name} "
              f"[{verifier.devices[0]}, {sizes.describe()}, {args.policy}]…", file=sys.stderr)
    result = evaluation.run()
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        from kernelcraft.report.terminal import result_view

        _console().print(result_view(result))
    return EXIT_OK


def cmd_problems(args) -> int:
    from kernelcraft.problems import ProblemError, load_problem
    from kernelcraft.problems.cost import compute_cost

    if args.action == "list":
        from kernelcraft.api import problems

        rows = problems(args.level)
        if not rows:
            levels = sorted({r["level"] for r in problems()})
            raise UsageError(f"kernelcraft problems: no problems at level {args.level} (levels here: "
                             f"{', '.join(map(str, levels))})")
        if args.json:
            print(json.dumps(rows))
        else:
            from kernelcraft.report.terminal import problem_list_view

            _console().print(problem_list_view(rows))
        return EXIT_OK
    if args.action == "show":
        from kernelcraft.problems.sizes import parse_sizes, resolve_sizes

        try:
            problem = load_problem(args.name)
            overrides = parse_sizes(args.sizes) if args.sizes else None
            sizes = resolve_sizes(problem, "small" if args.small else "full", "cpu", overrides)
            cost = compute_cost(problem.load(sizes=sizes))
        except (ProblemError, ValueError) as exc:
            raise UsageError(f"kernelcraft problems show: {exc}") from None
        info = {"name": problem.name, "path": str(problem.path), "level": problem.level, "sha": problem.sha,
                **cost.to_dict(), "sizes": sizes.to_dict(), "sizes_text": sizes.describe(), "source": problem.source}
        if args.json:
            print(json.dumps(info))
        else:
            from kernelcraft.report.terminal import problem_view

            _console().print(problem_view(info))
        return EXIT_OK
    raise UsageError("kernelcraft problems: choose list or show")


if __name__ == "__main__":  # `python -m kernelcraft.cli`: run the package's module, whose UsageError the
    from kernelcraft.cli import main as package_main  # subcommand modules raise (this file runs as __main__)

    sys.exit(package_main())
