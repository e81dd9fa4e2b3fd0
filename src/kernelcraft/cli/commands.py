"""The commands of `kernelcraft`, in the order `kernelcraft --help` lists them. Each is a module with `NAME`
(the command's word), `add_parser(sub)` (its argparse subparser) and `run(args) -> int` (its exit status);
a new command is one such module and one line here."""

from __future__ import annotations

from kernelcraft.cli import apply, bench, evaluate, export, mcp, problems, profile, report, rl, run, runs

COMMANDS = (evaluate, problems, profile, run, bench, apply, runs, report, export, rl, mcp)
