"""`kernelcraft eval PROBLEM CANDIDATE`: verify and time one candidate against a problem."""

from __future__ import annotations

import json
import sys

from kernelcraft.api import MAX_TRIALS
from kernelcraft.cli.common import EXIT_FAIL, EXIT_OK, YesOrNo, add_target_args, amount, show, usage_errors, whole

NAME = "eval"


def add_parser(sub) -> None:
    ev = sub.add_parser(NAME, help="verify and time one candidate against a problem")
    add_target_args(ev, "auto", "cpu, cuda, cuda:N or auto (default: a GPU if there is one)")
    ev.add_argument("--trials", type=whole(1, MAX_TRIALS), default=6,
                    help=f"correctness trials, each with fresh secret seeds (at most {MAX_TRIALS})")
    ev.add_argument("--no-compile-baseline", action="store_true", help="skip timing torch.compile")
    ev.add_argument("--allow-library", action=YesOrNo, default=True,
                    help="library (ATen, cuBLAS, cuDNN) kernels may run beside the candidate's own (default: yes; "
                         "a candidate with no kernel of its own is rejected either way)")
    ev.add_argument("--sanity-bound", type=amount(), default=10.0,
                    help="flag speedups over eager beyond this for review (default 10)")
    ev.add_argument("--budget", type=amount(), default=6.0, help="seconds of timing per candidate, at most")


def _say_waits(kind: str, info: dict) -> None:
    if kind == "lock_wait":
        print(f"{info['device']}: {info['message']}", file=sys.stderr)


def run(args) -> int:
    from kernelcraft import api

    with usage_errors(NAME):
        evaluation = api.prepare_evaluation(
            args.problem, args.candidate, device=args.device, policy=args.policy, size=args.size, sizes=args.sizes,
            backend=args.backend, trials=args.trials, compile_baseline=not args.no_compile_baseline,
            allow_library=args.allow_library, sanity_bound=args.sanity_bound, timing_budget=args.budget,
            cache_dir=args.cache_dir, on_event=None if args.json else _say_waits)
    problem, candidate, sizes = evaluation.problem, evaluation.candidate, evaluation.sizes
    if not args.json:
        print(f"evaluating {candidate.name} ({candidate.backend}) on {problem.name} "
              f"[{evaluation.verifier.devices[0]}, {sizes.describe()}, {args.policy}]…", file=sys.stderr)
    from kernelcraft.cli.run import terminate_as_interrupt
    from kernelcraft.errors import HarnessTampered

    try:
        with terminate_as_interrupt():  # SIGTERM as Ctrl-C: the worker killed, not left judging
            result = evaluation.run()
    except HarnessTampered as exc:  # no verdict to show: one line on stderr, as for any failure of the tool
        print(f"kernelcraft {NAME}: {exc}", file=sys.stderr)
        return EXIT_FAIL
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        from kernelcraft.report.terminal import result_view

        show(result_view(result))
    return EXIT_OK
