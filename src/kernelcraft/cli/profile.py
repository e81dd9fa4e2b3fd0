"""`kernelcraft profile PROBLEM CANDIDATE`: one call of a candidate, and of the reference, under Nsight
Compute, summarised (verify/profile).

Exit status: 0 when the candidate was profiled (a reference that could not be is a note), 2 on bad usage,
1 when no profile could be had (no ncu, no GPU, counters not permitted, a timeout, a candidate that fails
under ncu): one line on stderr, and with --json an object with `error` and `reason` on stdout.
"""

from __future__ import annotations

import json
import sys

from kernelcraft.cli.common import EXIT_FAIL, EXIT_OK, add_target_args, amount, show, usage_errors

NAME = "profile"


def add_parser(sub) -> None:
    pr = sub.add_parser(NAME, help="run one candidate (and the reference) under Nsight Compute: DRAM and SM "
                                   "throughput, occupancy, stalls, L2 hits, bank conflicts")
    add_target_args(pr, "cuda", "cuda or cuda:N (default: cuda, the first GPU)")
    pr.add_argument("--no-reference", action="store_true", help="profile the candidate only")
    pr.add_argument("--timeout", type=amount(), default=300.0, help="seconds per profile, at most (default 300)")


def run(args) -> int:
    from kernelcraft import api
    from kernelcraft.errors import ProfileError

    try:
        with usage_errors(NAME):
            prepared = api.prepare_profile(args.problem, args.candidate, device=args.device, policy=args.policy,
                                           size=args.size, sizes=args.sizes, backend=args.backend,
                                           cache_dir=args.cache_dir, timeout=args.timeout)
        if not args.json:
            print(f"profiling {prepared.candidate.name} ({prepared.candidate.backend}) on {prepared.problem.name} "
                  f"[{prepared.device}, {prepared.sizes.describe()}] with ncu {prepared.profiler.version}…",
                  file=sys.stderr)
        info = prepared.run(reference=not args.no_reference)
    except ProfileError as exc:
        print(f"kernelcraft profile: {exc}", file=sys.stderr)
        if args.json:
            print(json.dumps({"error": str(exc), "reason": exc.reason}))
        return EXIT_FAIL
    if args.json:
        print(json.dumps(info))
    else:
        from kernelcraft.report.terminal import profile_view

        show(profile_view(info))
    return EXIT_OK
