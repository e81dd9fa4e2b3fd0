"""`kernelcraft run`, `kernelcraft bench` and `kernelcraft runs`: the search commands of the CLI.

Like cli.py, this module prints; nothing it calls does. With --json the last line of stdout is one
JSON object; progress goes to stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
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
def _parse_sizes(text):
    from kernelcraft.problems.sizes import parse_sizes

    return parse_sizes(text) if text else None


def _settings(args, devices: list[str], sizes=None) -> dict:
    """What a resumed run needs besides its RunConfig: how to verify and whom to ask (never the key).
    `small` stays for stores and exports that read it; `sizes` is one problem's resolved sizes (run only)."""
    small = args.size == "small" or (args.size == "auto" and devices[0] == "cpu")
    return {"verify": {"device": args.device, "policy": args.policy, "small": small, "size": args.size,
                       "size_overrides": _parse_sizes(args.sizes),
                       "sizes": sizes.to_dict() if sizes else None,
                       "compile_baseline": not args.no_compile_baseline, "timing_budget": args.timing_budget},
            "proposer": {"model": _model_name(args), "base_url": args.base_url, "reasoning_effort": args.reasoning_effort,
                         "max_tokens": args.max_output_tokens, "temperature": args.temperature,
                         "timeout_s": args.llm_timeout, "max_retries": args.llm_retries,
                         "concurrency": args.concurrency}}


def _model_name(args) -> str:
    return args.model or os.environ.get("KERNELCRAFT_MODEL") or "builtin"


def _run_config(args, devices: list[str]):
    from kernelcraft.propose.builtin.proposer import FAMILIES, STRATEGIES
    from kernelcraft.search import Budget, RunConfig, get_strategy

    get_strategy(args.strategy)
    builtin = _model_name(args) == "builtin"
    if builtin and args.strategy not in STRATEGIES:
        raise ValueError(f"--strategy {args.strategy}: the built-in engineer gives one answer per request; "
                         f"use {' or '.join(STRATEGIES)}, or a model (--model)")
    if builtin and args.backend and args.backend not in FAMILIES:
        raise ValueError(f"--backend {args.backend}: the built-in engineer writes {', '.join(FAMILIES)} kernels")

    seeds = []
    for path in args.seed_kernel:
        from kernelcraft.candidate import Candidate

        seeds.append(Candidate.from_file(path).source)
    if builtin:
        backend = args.backend or next(iter(FAMILIES))
    else:
        backend = args.backend or ("cuda_nvrtc" if devices[0].startswith("cuda") else "triton")
    if args.profile:  # said now, not after the first round
        from kernelcraft.verify.profile import ProfileError, check_device, find_ncu

        try:
            find_ncu()
            check_device(devices[0])
        except ProfileError as exc:
            raise ValueError(f"--profile: {exc}") from None
    config = RunConfig(strategy=args.strategy, backend=backend, rounds=args.rounds, ideas=args.ideas,
                       impls=args.impls or (1 if builtin else 2), beam=args.beam, samples=args.samples, islands=args.islands,
                       concurrency=args.concurrency, seed=args.seed, seeds=seeds, profile=args.profile,
                       stop_after_failures=args.stop_after_failures,
                       budget=Budget(args.max_candidates, args.max_tokens, args.max_usd,
                                     args.max_minutes * 60 if args.max_minutes else None))
    config.check()
    return config


def _verifier(settings: dict, cache_dir: Path | None, on_event=None):
    from kernelcraft.verify import TimingConfig, Verifier, VerifyConfig

    v = settings["verify"]
    size = v.get("size") or ("small" if v["small"] else "full")  # stores from before `size` have `small`
    config = VerifyConfig(policy=v["policy"], size=size, sizes=v.get("size_overrides"),
                          compile_baseline=v["compile_baseline"],
                          timing=TimingConfig(budget_s=v["timing_budget"]))
    if cache_dir:
        config.cache_dir = cache_dir
    return Verifier(v["device"], config, on_event=on_event)


def _admit(verifier, problem) -> None:
    """A problem the device cannot hold is the problem's error, said once before any candidate."""
    if problem is None:
        return
    try:
        verifier.admit(problem)
    except Exception:
        verifier.close()
        raise


def _proposer(settings: dict, args, device: str):
    from kernelcraft.verify.policy import get_policy

    p = settings["proposer"]
    if p["model"] == "builtin":
        from kernelcraft.propose.builtin.proposer import BuiltinProposer

        return BuiltinProposer(device, precision_moves=get_policy(settings["verify"]["policy"]).allow_tf32)
    from kernelcraft.propose.llm import ClientSettings, LLMProposer, PriceTable, resolve_model

    spec = resolve_model(p["model"], args.base_url or p["base_url"], args.api_key)
    prices = PriceTable(args.prices)
    if args.max_usd is not None and prices.price(spec.model) is None:
        raise ValueError(f"--max-usd: no price known for {spec.model}; add it with --prices FILE")
    policy = get_policy(settings["verify"]["policy"])
    return LLMProposer(spec, device, (policy.name, policy.summary),
                       ClientSettings(timeout_s=p["timeout_s"], max_retries=p["max_retries"],
                                      concurrency=p["concurrency"], reasoning_effort=p["reasoning_effort"],
                                      max_tokens=p["max_tokens"], temperature=p["temperature"]),
                       prices, precision=policy.allow_tf32)


def _store(path):
    from kernelcraft.store import Store

    return Store(path)


# commands ---------------------------------------------------------------------------------------------
def cmd_run(args) -> int:
    from kernelcraft.problems import load_problem
    from kernelcraft.problems.sizes import resolve_sizes
    from kernelcraft.search import resume_run, start_run
    from kernelcraft.search.run import RunInterrupted
    from kernelcraft.store import StoreError
    from kernelcraft.verify import resolve_devices

    try:
        store = _store(args.store)
        if args.resume:
            if args.problem:
                raise ValueError("give either PROBLEM or --resume RUN, not both")
            row = store.run(args.resume)
            settings = {k: v for k, v in row["config"].items() if k != "run"}
            devices = resolve_devices(settings["verify"]["device"])
            problem = None
        else:
            if not args.problem:
                raise ValueError("a PROBLEM (file or suite name) is required, or --resume RUN")
            problem = load_problem(args.problem)
            devices = resolve_devices(args.device)
            sizes = resolve_sizes(problem, args.size, devices[0].split(":")[0],
                                  _parse_sizes(args.sizes))
            problem.load(sizes=sizes)  # a problem that does not import: said now
            settings = _settings(args, devices, sizes)
            config = _run_config(args, devices)
        proposer = _proposer(settings, args, devices[0])
        if problem is not None and hasattr(proposer, "coverage"):  # the built-in engineer says what it cannot do
            proposer.coverage(problem, config.backend)
        progress = Progress()  # on stderr, --json or not: stdout holds the summary alone
        verifier = _verifier(settings, args.cache_dir, progress.event)
        _admit(verifier, problem)
    except (StoreError, *_usage_errors()) as exc:
        raise UsageError(f"kernelcraft run: {exc}") from None
    if problem is not None:  # on stderr: with --json, stdout holds the summary alone
        print(f"{problem.name}: {sizes.describe()}", file=sys.stderr)
    try:
        with verifier, progress, _terminate_as_interrupt():
            if args.resume:
                outcome = resume_run(store, args.resume, proposer, verifier, args.out, progress.event)
            else:
                outcome = start_run(store, problem, proposer, verifier, config, settings, args.out,
                                    on_event=progress.event)
    except RunInterrupted as stop:
        print(f"kernelcraft run: interrupted; run {stop.run_id} is stored as stopped, and "
              f"`kernelcraft run --resume {stop.run_id}` goes on from there", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        proposer.close()
        store.close()
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
    from kernelcraft.problems import load_problem, load_problem_dir, load_suite
    from kernelcraft.search import run_bench
    from kernelcraft.verify import resolve_devices

    try:
        problems = _bench_problems(args.suite, load_problem, load_problem_dir, load_suite)
        if args.only:
            keep = [s.strip() for s in args.only.split(",") if s.strip()]
            problems = [p for p in problems if any(k in p.name for k in keep)]
        problems = problems[:args.limit] if args.limit else problems
        if not problems:
            raise ValueError(f"no problems in {args.suite!r} match")
        devices = resolve_devices(args.device)
        settings = _settings(args, devices)
        _check_overrides(settings["verify"]["size_overrides"], problems)
        config = _run_config(args, devices)
        store = _store(args.store)
        proposer = _proposer(settings, args, devices[0])
        progress = Progress()  # on stderr, --json or not: stdout holds the summary alone
        verifier = _verifier(settings, args.cache_dir, progress.event)
    except _usage_errors() as exc:
        raise UsageError(f"kernelcraft bench: {exc}") from None
    try:
        with verifier, progress:
            summary = run_bench(store, args.suite, problems, proposer, verifier, config, settings, args.out,
                                progress.event)
    finally:
        proposer.close()
        store.close()
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


def _check_overrides(overrides: dict | None, problems) -> None:
    """Bench's --sizes apply to each problem that defines the name; a name that none defines is a typo."""
    from kernelcraft.problems.sizes import module_constants

    if not overrides:
        return
    defined = set().union(*(module_constants(p) for p in problems))
    unknown = [n for n in overrides if n not in defined]
    if unknown:
        raise ValueError(f"--sizes: no problem here has a module-level constant {unknown[0]!r}")


def _bench_problems(suite, load_problem, load_problem_dir, load_suite):
    if suite == "all":
        return load_suite()
    if suite.startswith("level") and suite[5:].isdigit():
        return load_suite(int(suite[5:]))
    path = Path(suite)
    if path.is_dir():
        return load_problem_dir(path)
    return [load_problem(suite)]


def cmd_runs(args) -> int:
    from kernelcraft.search import outcome
    from kernelcraft.store import StoreError

    if args.action not in ("list", "show"):
        raise UsageError("kernelcraft runs: choose list or show")
    try:
        store = _store(args.store)
        if args.action == "list":
            rows = []
            for r in store.runs(args.limit):
                best = store.result(r["best_candidate"]) if r["best_candidate"] else None
                usage = store.usage(r["id"])
                rows.append({"id": r["id"], "problem": r["problem"], "strategy": r["strategy"],
                             "proposer": r["proposer"], "status": r["status"], "stop_reason": r["stop_reason"],
                             "created": r["created"], "candidates": len(store.candidates(r["id"])),
                             "speedup_eager": best["speedup_eager"] if best else None,
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
    data = outcome.to_dict()
    if as_json:
        print(json.dumps(data))
        return
    from kernelcraft.report.terminal import run_view

    _console().print(run_view(data, show_error=not error_said))
