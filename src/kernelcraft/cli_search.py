"""`kernelcraft run`, `kernelcraft bench` and `kernelcraft runs`: the search commands of the CLI.

Like cli.py, this module prints; nothing it calls does. With --json the last line of stdout is one
JSON object; progress goes to stderr.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from pathlib import Path

from kernelcraft.cli import (EXIT_FAIL, EXIT_FAILING, EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED, UsageError, _console,
                             _usage_errors)
from kernelcraft.cli_progress import Progress

PROPOSER_HELP = ("PROVIDER/NAME: openai/…, anthropic/…, gemini/…, openrouter/…, deepseek/…, vllm/…, sglang/…, "
                 "ollama/…, or any name with --base-url; `builtin` for the built-in kernel engineer "
                 "(default: $KERNELCRAFT_MODEL, else builtin)")


def add_commands(sub) -> None:
    run = sub.add_parser("run", help="optimize one problem: ask a proposer for kernels, verify them, keep the best")
    run.add_argument("problem", nargs="?", help="a KernelBench-format file or a suite name such as level1/softmax")
    run.add_argument("--resume", metavar="RUN", help="continue a stopped or killed run (its settings are stored)")
    _search_flags(run)

    bench = sub.add_parser("bench", help="run a strategy over many problems and report fast_p")
    bench.add_argument("suite", help="level1, level2, level3, all, a directory of problem files, or a file")
    bench.add_argument("--only", default="", help="comma-separated problem names (or name fragments) to keep")
    bench.add_argument("--limit", type=int, default=None, help="at most this many problems")
    _search_flags(bench)

    runs = sub.add_parser("runs", help="the run store: list runs, show one")
    rsub = runs.add_subparsers(dest="action")
    ls = rsub.add_parser("list", help="the latest runs")
    ls.add_argument("--limit", type=int, default=30)
    ls.add_argument("--store", type=Path, default=None, help="the run store (default ~/.kernelcraft/runs.db)")
    ls.add_argument("--json", action="store_true")
    show = rsub.add_parser("show", help="one run: its trajectory, candidates and best kernel")
    show.add_argument("run", help="a run id (a unique prefix will do)")
    show.add_argument("--store", type=Path, default=None)
    show.add_argument("--json", action="store_true")


def _search_flags(p) -> None:
    g = p.add_argument_group("proposer")
    g.add_argument("--model", default="", help=PROPOSER_HELP)
    g.add_argument("--base-url", default=None, help="an OpenAI-compatible endpoint (or Anthropic's), e.g. http://localhost:8000/v1")
    g.add_argument("--api-key", default=None, help="default: the provider's variable (OPENAI_API_KEY, …) or KERNELCRAFT_API_KEY")
    g.add_argument("--reasoning-effort", choices=["low", "medium", "high"], default=None)
    g.add_argument("--max-output-tokens", type=int, default=None, help="per answer")
    g.add_argument("--temperature", type=float, default=None)
    g.add_argument("--prices", type=Path, default=None, help="a JSON price table extending the bundled one")
    g.add_argument("--concurrency", type=int, default=8, help="proposer calls in flight (default 8)")
    g.add_argument("--llm-timeout", type=float, default=600.0, help="seconds per HTTP request")
    g.add_argument("--llm-retries", type=int, default=4, help="retries of a failed call (429, 5xx, broken stream)")
    g.add_argument("--stop-after-failures", type=int, default=3, metavar="N",
                   help="stop the run when N calls in a row fail after their retries (default 3)")
    s = p.add_argument_group("search")
    s.add_argument("--strategy", default="tree", help="tree (default), refine, sample, evolve")
    s.add_argument("--backend", default=None, help="cuda_nvrtc (GPU default), triton (CPU default), cuda_inline, cpp")
    s.add_argument("--rounds", type=int, default=5, help="tree rounds, refine turns, evolve generations (default 5)")
    s.add_argument("--ideas", type=int, default=4, help="tree: ideas per round (K)")
    s.add_argument("--impls", type=int, default=None, help="tree: implementations per idea (M; default 2, 1 for builtin)")
    s.add_argument("--beam", type=int, default=2, help="tree: kernels seeding the next round (B)")
    s.add_argument("--samples", type=int, default=8, help="sample: N; refine: conversations; evolve: children per generation")
    s.add_argument("--islands", type=int, default=1, help="evolve: separate archives")
    s.add_argument("--seed", type=int, default=0, help="evolve's random draws")
    s.add_argument("--seed-kernel", action="append", default=[], type=Path, metavar="FILE",
                   help="a starting kernel (ModelNew file); repeat for more")
    b = p.add_argument_group("budget (the run stops cleanly at the first reached)")
    b.add_argument("--max-candidates", type=int, default=None)
    b.add_argument("--max-tokens", type=int, default=None, help="input + output tokens over the run")
    b.add_argument("--max-usd", type=float, default=None, help="money, from the price table")
    b.add_argument("--max-minutes", type=float, default=None, help="wall time")
    v = p.add_argument_group("verifier")
    v.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    v.add_argument("--policy", default="strict", choices=["strict", "relaxed"])
    v.add_argument("--size", default="auto", choices=["auto", "full", "small"],
                   help="full, or small (SMALL_SIZES, else sizes derived from the cost to fit a CPU); "
                        "auto = full on a GPU, small on the CPU")
    v.add_argument("--sizes", default=None, metavar="NAME=N,…",
                   help="set module-level size constants on top of --size, e.g. batch_size=16,dim=4096; bench sets "
                        "each in every problem that defines it (a name no problem defines is an error)")
    v.add_argument("--no-compile-baseline", action="store_true")
    v.add_argument("--timing-budget", type=float, default=6.0, help="seconds of timing per candidate, at most")
    v.add_argument("--cache-dir", type=Path, default=None)
    v.add_argument("--profile", action="store_true",
                   help="run each round's best kernels under Nsight Compute (ncu) once each: DRAM and SM throughput, "
                        "occupancy, stalls, L2 hits, bank conflicts go into their feedback and the report")
    o = p.add_argument_group("output")
    o.add_argument("--store", type=Path, default=None, help="the run store (default ~/.kernelcraft/runs.db)")
    o.add_argument("--out", type=Path, default=Path("."), help="where the best kernel is written (default: here)")
    o.add_argument("--json", action="store_true", help="the summary as JSON, on the last line of stdout")


# settings ---------------------------------------------------------------------------------------------
SETTINGS = ("model", "base_url", "api_key", "reasoning_effort", "max_output_tokens", "temperature", "prices",
            "concurrency", "llm_timeout", "llm_retries", "stop_after_failures", "strategy", "backend", "rounds",
            "ideas", "impls", "beam", "samples", "islands", "seed", "max_candidates", "max_tokens", "max_usd",
            "max_minutes", "device", "policy", "size", "sizes", "timing_budget", "cache_dir", "profile")


def _options(args) -> dict:
    """The search flags as kernelcraft.api's options (the API holds the policy: defaults, checks)."""
    return {**{name: getattr(args, name) for name in SETTINGS}, "model": args.model or None,
            "seeds": list(args.seed_kernel), "compile_baseline": not args.no_compile_baseline}


# commands ---------------------------------------------------------------------------------------------
def cmd_run(args) -> int:
    from kernelcraft import api
    from kernelcraft.search.run import RunInterrupted

    progress = Progress()  # on stderr, --json or not: stdout holds the summary alone
    try:
        prepared = api.prepare_run(args.problem, resume=args.resume, store=args.store, out_dir=args.out,
                                   on_event=progress.event, **_options(args))
    except _usage_errors() as exc:
        raise UsageError(f"kernelcraft run: {exc}") from None
    if prepared.problem is not None:  # on stderr: with --json, stdout holds the summary alone
        print(f"{prepared.problem.name}: {prepared.sizes.describe()}", file=sys.stderr)
    try:
        with progress, _terminate_as_interrupt():
            outcome = prepared.run(progress.event)
    except RunInterrupted as stop:
        print(f"kernelcraft run: interrupted; run {stop.run_id} is stored as stopped, and "
              f"`kernelcraft run --resume {stop.run_id}` goes on from there", file=sys.stderr)
        return EXIT_INTERRUPTED
    _report_run(outcome, args.json, error_said=True)
    if outcome.error:  # the run stopped because its proposer could not answer: said once, here
        print(f"kernelcraft run: {outcome.error}", file=sys.stderr)
    return _exit_status(outcome.status, outcome.stop_reason)


@contextlib.contextmanager
def _terminate_as_interrupt():
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


def _exit_status(status: str, stop_reason: str | None) -> int:
    from kernelcraft.search.run import FAILING, REFUSED

    code = (stop_reason or "").partition(":")[0]
    if code == REFUSED:
        return EXIT_REFUSED
    if code == FAILING:
        return EXIT_FAILING
    return EXIT_OK if status != "failed" else EXIT_FAIL


def cmd_bench(args) -> int:
    from kernelcraft import api

    progress = Progress()  # on stderr, --json or not: stdout holds the summary alone
    try:
        prepared = api.prepare_bench(args.suite, only=args.only, limit=args.limit, store=args.store,
                                     out_dir=args.out, on_event=progress.event, **_options(args))
    except _usage_errors() as exc:
        raise UsageError(f"kernelcraft bench: {exc}") from None
    with progress:
        summary = prepared.run(progress.event)
    if args.json:
        print(json.dumps(summary))
    else:
        from kernelcraft.report.terminal import bench_view

        _console().print(bench_view(summary))
    stopped = [r for r in summary["rows"] if r.get("error")]
    if stopped:  # the bench stops at a refusal (every problem would meet it); a run whose calls kept failing does not
        worst = max(stopped, key=lambda r: _exit_status(r["status"], r["stop_reason"]))
        more = f" ({len(stopped)} runs stopped so)" if len(stopped) > 1 else ""
        print(f"kernelcraft bench: {worst['problem']}: {worst['error']}{more}", file=sys.stderr)
        return _exit_status(worst["status"], worst["stop_reason"])
    return EXIT_OK


def cmd_runs(args) -> int:
    from kernelcraft.search import outcome
    from kernelcraft.store import StoreError

    if args.action not in ("list", "show"):
        raise UsageError("kernelcraft runs: choose list or show")
    try:
        from kernelcraft.api import open_store

        store = open_store(args.store)
        if args.action == "list":
            rows = []
            for r in store.runs(args.limit):
                best = store.result(r["best_candidate"]) if r["best_candidate"] else None
                usage = store.usage(r["id"])
                rows.append({"id": r["id"], "problem": r["problem"], "strategy": r["strategy"],
                             "proposer": r["proposer"], "status": r["status"], "stop_reason": r["stop_reason"],
                             "created": r["created"], "candidates": len(store.candidates(r["id"])),
                             "speedup_eager": best.speedup_eager if best else None,
                             "tokens": usage["input_tokens"] + usage["output_tokens"], "cost": usage["cost"]})
            if args.json:
                print(json.dumps(rows))
            else:
                from kernelcraft.report.terminal import runs_view

                _console().print(runs_view(rows))
            return EXIT_OK
        summary = outcome(store, store.run(args.run)["id"])
    except StoreError as exc:
        raise UsageError(f"kernelcraft runs: {exc}") from None
    _report_run(summary, args.json)
    return EXIT_OK


def _report_run(outcome, as_json: bool, error_said: bool = False) -> None:
    """The summary; `error_said`: the caller says the run's error on its own line, so the view leaves it out."""
    if as_json:
        print(json.dumps(outcome.to_dict()))
        return
    from kernelcraft.report.terminal import run_view

    _console().print(run_view(outcome, show_error=not error_said))
