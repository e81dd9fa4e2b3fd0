"""`kernelcraft …`: the command line, a face over kernelcraft.api (the only package that prints).

app.py parses and dispatches; commands.py lists the commands, one module each (evaluate.py is `eval`,
problems.py, profile.py, run.py, bench.py, runs.py, report.py, export.py); common.py holds what they share
(exit statuses, UsageError, shared options, the error mapping, the console); progress.py the live line of
`run` and `bench`. Nothing outside this package imports it.

Exit status: 0 when the command ran (whatever the verdict), 2 on bad usage or an unreadable file (one line on
stderr), 1 on an internal failure, 3 and 4 when a run's model endpoint refused or kept failing, 130 when
interrupted.
"""


def main(argv: list[str] | None = None) -> int:
    """Run `kernelcraft` with `argv` (default: sys.argv[1:]); the exit status. The `kernelcraft` script's entry."""
    from kernelcraft.cli.app import main as run_main

    return run_main(argv)


__all__ = ["main"]
