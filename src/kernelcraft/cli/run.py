"""`kernelcraft run PROBLEM` (or `--resume RUN`): optimize one problem. With --json the last line of stdout is
one JSON object; the progress line goes to stderr."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

from kernelcraft.cli.common import (EXIT_INTERRUPTED, add_search_args, exit_status, print_run, search_options,
                                    usage_errors)

NAME = "run"


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help="optimize one problem: ask a proposer for kernels, verify them, keep the best")
    p.add_argument("problem", nargs="?", help="a KernelBench-format file or a suite name such as level1/softmax")
    p.add_argument("--resume", metavar="RUN", help="continue a stopped or killed run (its settings are stored)")
    add_search_args(p)


def run(args) -> int:
    from kernelcraft import api
    from kernelcraft.cli.progress import Progress
    from kernelcraft.errors import RunInterrupted

    progress = Progress()  # on stderr, --json or not: stdout holds the summary alone
    with usage_errors(NAME):
        prepared = api.prepare_run(args.problem, resume=args.resume, store=args.store, out_dir=args.out,
                                   on_event=progress.event, **search_options(args))
    if prepared.problem is not None:  # on stderr: with --json, stdout holds the summary alone
        print(f"{prepared.problem.name}: {prepared.sizes.describe()}", file=sys.stderr)
    try:
        with progress, terminate_as_interrupt():
            outcome = prepared.run(progress.event)
    except RunInterrupted as stop:
        print(f"kernelcraft run: interrupted; run {stop.run_id} is stored as stopped, and "
              f"`kernelcraft run --resume {stop.run_id}` goes on from there", file=sys.stderr)
        return EXIT_INTERRUPTED
    print_run(outcome, args.json, error_said=True)
    if outcome.error:  # the run stopped because its proposer could not answer: said once, here
        print(f"kernelcraft run: {outcome.error}", file=sys.stderr)
    return exit_status(outcome.status, outcome.stop_reason)


@contextlib.contextmanager
def terminate_as_interrupt():
    """SIGTERM (a scheduler's or `kill`'s stop) ends a run as Ctrl-C does: stored as stopped, resumable, instead
    of a process gone with its run left `running`. Only where this is the main thread (signals are delivered
    there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
