"""`kernelcraft profile PROBLEM CANDIDATE`: one call of a candidate, and of the reference, under Nsight
Compute, summarised (verify/profile). Like cli.py, this module prints; nothing it calls does.

Exit status: 0 when the candidate was profiled (a reference that could not be is a note), 2 on bad usage,
1 when no profile could be had (no ncu, no GPU, counters not permitted, a timeout, a candidate that fails
under ncu): one line on stderr, and with --json an object with `error` and `reason` on stdout.
"""

from __future__ import annotations

import json
import sys

from kernelcraft.cli import EXIT_FAIL, EXIT_OK, UsageError, _console, _usage_errors, add_target_args, load_target


def add_commands(sub) -> None:
    pr = sub.add_parser("profile", help="run one candidate (and the reference) under Nsight Compute: DRAM and SM "
                                        "throughput, occupancy, stalls, L2 hits, bank conflicts")
    add_target_args(pr, "cuda", "cuda or cuda:N (default: cuda, the first GPU)")
    pr.add_argument("--no-reference", action="store_true", help="profile the candidate only")
    pr.add_argument("--timeout", type=float, default=300.0, help="seconds per profile, at most (default 300)")


def cmd_profile(args) -> int:
    from kernelcraft.verify.policy import get_policy
    from kernelcraft.verify.profile import Profiler, ProfileError, check_device, find_ncu

    device = "cuda:0" if args.device in ("cuda", "auto") else args.device

    def gpu() -> str:
        check_device(device)
        return device

    try:
        find_ncu()  # the tool first: on a machine without it nothing else matters
        problem, candidate, device, sizes = load_target(args, gpu)
        profiler = Profiler(device, args.cache_dir, args.timeout)
    except ProfileError as exc:
        return _failed(args, exc)
    except _usage_errors() as exc:
        raise UsageError(f"kernelcraft profile: {exc}") from None
    exact = not get_policy(args.policy).allow_tf32
    if not args.json:
        print(f"profiling {candidate.name} ({candidate.backend}) on {problem.name} [{device}, {sizes.describe()}] "
              f"with ncu {profiler.version}…", file=sys.stderr)
    try:
        profile = profiler.run(problem, candidate, sizes.constants, exact)
    except ProfileError as exc:
        return _failed(args, exc)
    reference, reference_error = None, None
    if not args.no_reference:
        try:
            reference = profiler.run(problem, None, sizes.constants, exact)
        except ProfileError as exc:
            reference_error = str(exc)
    info = {"problem": problem.name, "candidate": candidate.name, "backend": candidate.backend, "device": device,
            "sizes": sizes.to_dict(), "profile": profile.to_dict(),
            "reference": reference.to_dict() if reference else None, "reference_error": reference_error}
    if args.json:
        print(json.dumps(info))
    else:
        from kernelcraft.report.terminal import profile_view

        _console().print(profile_view(info))
    return EXIT_OK


def _failed(args, exc) -> int:
    print(f"kernelcraft profile: {exc}", file=sys.stderr)
    if args.json:
        print(json.dumps({"error": str(exc), "reason": exc.reason}))
    return EXIT_FAIL
