"""`kernelcraft …`: the parser of every command (commands.py lists them) and the dispatch to the one asked for.

Exit status: 0 when the command ran (whatever the verdict), 2 on bad usage or an unreadable file
(one line on stderr), 1 on an internal failure; `run` and `bench` exit 3 when the model endpoint refused
their requests (bad key, unknown model: HTTP 401/403/404/400) and 4 when its calls kept failing after
their retries (HTTP 5xx, timeouts), each with one line on stderr naming the model, the status and the
provider's message; 130 when interrupted.
"""

from __future__ import annotations

import sys

from kernelcraft.cli.commands import COMMANDS
from kernelcraft.cli.common import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, Parser, UsageError


def build_parser() -> Parser:
    parser = Parser(prog="kernelcraft", description="Turn a PyTorch program into faster, verified GPU kernels.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    handlers = {command.NAME: command.run for command in COMMANDS}
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
        handler = handlers.get(args.command)
        if handler is None:
            raise UsageError(f"kernelcraft: choose a command: {', '.join(handlers)} (kernelcraft --help lists them)")
        return handler(args)
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        print("kernelcraft: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
