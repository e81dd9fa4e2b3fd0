"""What every command of the CLI shares: exit statuses, the usage error and its one-line report, the argument
parser that raises it, the options several commands take (sizes, a target to run, a search's flags), the
mapping of the library's errors to usage errors, and the console the views are printed on."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from pathlib import Path

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_REFUSED, EXIT_FAILING = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM (128 + SIGINT, as shells report it)

PIPED_WIDTH = 160  # piped or redirected output: rich's 80 would elide table columns


class UsageError(Exception):
    """Bad usage or bad input: `main` prints the message, one line on stderr, and exits 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit status 2, as for every other usage error
        raise UsageError(f"{self.prog}: {message}")


class YesOrNo(argparse.BooleanOptionalAction):
    """`--x` / `--no-x`: both given is a usage error (argparse let the last one win, silently)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = f"_given_{self.dest}"
        earlier = getattr(namespace, given, None)
        if earlier is not None and earlier != option_string:
            parser.error(f"{earlier} and {option_string} both given: say one")
        setattr(namespace, given, option_string)
        super().__call__(parser, namespace, values, option_string)


# numbers a flag takes: out of range is a usage error, never a run that does something odd --------------
def whole(low: int = 1, high: int | None = None):
    """An argparse type: an integer from `low` to `high` (inclusive; no upper bound where None)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value} is out of range: {low} to {high}" if high is not None else
                                             f"{value} is out of range: at least {low}")
        return value
    parse.__name__ = "whole number"
    return parse


def amount(low: float = 0.0, high: float | None = None, low_allowed: bool = False):
    """An argparse type: a finite number above `low` (or equal to it, `low_allowed`), below `high` where given."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value != value or value in (float("inf"), float("-inf")) or value < low or \
                (value == low and not low_allowed) or (high is not None and value >= high):
            bound = f"{'at least' if low_allowed else 'above'} {low:g}" + (f" and below {high:g}" if high else "")
            raise argparse.ArgumentTypeError(f"{text} is out of range: {bound}")
        return value
    parse.__name__ = "number"
    return parse


# errors -----------------------------------------------------------------------------------------------
def bad_input() -> tuple[type[Exception], ...]:
    """The library's errors for bad input (a problem, candidate, setting, run or store it cannot use): every
    KernelcraftError, and the plain ValueErrors of the layers below it."""
    from kernelcraft.errors import KernelcraftError

    return (KernelcraftError, ValueError)


@contextlib.contextmanager
def usage_errors(command: str):
    """Bad input raised inside is a usage error of `kernelcraft COMMAND`, its message kept (one line)."""
    try:
        yield
    except bad_input() as exc:
        raise UsageError(f"kernelcraft {command}: {exc}") from None


# options ----------------------------------------------------------------------------------------------
SIZE_HELP = ("problem sizes: full, or small (the problem's SMALL_SIZES, else sizes derived from its cost to fit a "
             "CPU); auto = full on a GPU, small on the CPU")
SIZES_HELP = ("set the problem's module-level size constants, e.g. batch_size=16,dim=4096 or input_shape=(128,4096), "
              "on top of --size")


def add_size_args(p, size: bool = True, sizes_note: str = "") -> None:
    """--size auto|full|small (unless `size` is false) and --sizes NAME=N,… (`sizes_note` added to its help)."""
    if size:
        p.add_argument("--size", default="auto", choices=["auto", "full", "small"], help=SIZE_HELP)
    p.add_argument("--sizes", default=None, metavar="NAME=N,…", help=SIZES_HELP + sizes_note)


def backend_names(promptable: bool = False) -> str:
    """The backends, for help text (`promptable`: those a model can be asked for)."""
    from kernelcraft import api

    return ", ".join(b["name"] for b in api.backends() if b["promptable"] or not promptable)


def add_target_args(p, device_default: str, device_help: str) -> None:
    """What to run, shared by `eval` and `profile`: problem, candidate, device, policy, backend, sizes, cache,
    JSON output."""
    p.add_argument("problem", help="a KernelBench-format file, or a suite name such as level1/softmax")
    p.add_argument("candidate", help="a file defining ModelNew, or example:NAME for a bundled one")
    p.add_argument("--device", default=device_default, help=device_help)
    p.add_argument("--policy", default="strict", choices=["strict", "relaxed"])
    p.add_argument("--backend", default="", help=f"{backend_names()} (default: detected)")
    add_size_args(p)
    p.add_argument("--cache-dir", type=Path, default=None, help="builds and baselines (default ~/.cache/kernelcraft)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")


def add_store_arg(p) -> None:
    p.add_argument("--store", type=Path, default=None,
                   help="the run store, a SQLite file (default: $KERNELCRAFT_HOME, a directory holding runs.db or the "
                        "file itself; else ~/.kernelcraft/runs.db)")


PROPOSER_HELP = ("PROVIDER/NAME: openai/…, anthropic/…, gemini/…, openrouter/…, deepseek/…, vllm/…, sglang/…, "
                 "ollama/…, or any name with --base-url; `builtin` for the built-in kernel engineer "
                 "(default: $KERNELCRAFT_MODEL, else builtin)")


def add_search_args(p, cluster: bool = True) -> None:
    """The flags of `run` and `bench` (and, but for the cluster's, `apply`): proposer, search, budget, verifier,
    cluster, output."""
    g = p.add_argument_group("proposer")
    g.add_argument("--model", default="", help=PROPOSER_HELP)
    g.add_argument("--base-url", default=None,
                   help="an OpenAI-compatible endpoint (or Anthropic's), e.g. http://localhost:8000/v1")
    g.add_argument("--api-key", default=None,
                   help="default: the provider's variable (OPENAI_API_KEY, …) or KERNELCRAFT_API_KEY")
    g.add_argument("--reasoning-effort", choices=["low", "medium", "high"], default=None)
    g.add_argument("--max-output-tokens", type=whole(1), default=None, help="per answer")
    g.add_argument("--temperature", type=amount(low_allowed=True), default=None)
    g.add_argument("--prices", type=Path, default=None, help="a JSON price table extending the bundled one")
    g.add_argument("--concurrency", type=whole(1), default=8, help="proposer calls in flight (default 8)")
    g.add_argument("--llm-timeout", type=amount(), default=600.0, help="seconds per HTTP request")
    g.add_argument("--llm-retries", type=whole(0), default=4, help="retries of a failed call (429, 5xx, broken stream)")
    g.add_argument("--stop-after-failures", type=whole(1), default=3, metavar="N",
                   help="stop the run when N calls in a row fail after their retries (default 3)")
    s = p.add_argument_group("search")
    s.add_argument("--strategy", default="tree", help="tree (default), refine, sample, evolve")
    s.add_argument("--backend", default=None, help=f"{backend_names(promptable=True)} (default: the built-in "
                   "engineer's first, or for a model cuda_nvrtc on a GPU and triton on the CPU)")
    s.add_argument("--rounds", type=whole(1), default=5, help="tree rounds, refine turns, evolve generations (default 5)")
    s.add_argument("--ideas", type=whole(1), default=4, help="tree: ideas per round (K)")
    s.add_argument("--impls", type=whole(1), default=None, help="tree: implementations per idea (M; default 2, 1 for builtin)")
    s.add_argument("--beam", type=whole(1), default=2, help="tree: kernels seeding the next round (B)")
    s.add_argument("--samples", type=whole(1), default=8,
                   help="sample: N; refine: conversations; evolve: children per generation")
    s.add_argument("--islands", type=whole(1), default=1, help="evolve: separate archives")
    s.add_argument("--seed", type=int, default=0, help="evolve's random draws")
    s.add_argument("--seed-kernel", action="append", default=[], type=Path, metavar="FILE",
                   help="a starting kernel (ModelNew file); repeat for more")
    b = p.add_argument_group("budget (the run stops cleanly at the first reached)")
    b.add_argument("--max-candidates", type=whole(1), default=None)
    b.add_argument("--max-tokens", type=whole(1), default=None, help="input + output tokens over the run")
    b.add_argument("--max-usd", type=amount(), default=None,
                   help="money, from the price table (a model's; the built-in engineer costs nothing)")
    b.add_argument("--max-minutes", type=amount(), default=None,
                   help="wall time: no new work once less is left than the run's median verdict took, and what is "
                        "still queued then is not judged (a resume judges it)")
    v = p.add_argument_group("verifier")
    v.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto")
    v.add_argument("--policy", default="strict", choices=["strict", "relaxed"])
    add_size_args(v, sizes_note="; bench sets each in every problem that defines it (a name no problem defines "
                                "is an error)")
    v.add_argument("--no-compile-baseline", action="store_true")
    v.add_argument("--timing-budget", type=amount(), default=6.0, help="seconds of timing per candidate, at most")
    v.add_argument("--cache-dir", type=Path, default=None)
    v.add_argument("--profile", action="store_true",
                   help="run each round's best kernels under Nsight Compute (ncu) once each: DRAM and SM throughput, "
                        "occupancy, stalls, L2 hits, bank conflicts go into their feedback and the report")
    if cluster:
        c = p.add_argument_group("cluster (Ray: pip install 'kernelcraft[ray]')")
        c.add_argument("--cluster", default=None, metavar="local|auto|ADDRESS",
                       help="judge candidates on a Ray cluster, one verifier actor per GPU: local starts Ray here, auto "
                            "joins the one `ray start` made here, else a cluster's address (default: "
                            "$KERNELCRAFT_CLUSTER, else this machine alone)")
        c.add_argument("--actors", type=whole(1), default=None, metavar="N",
                       help="at most N verifier actors (default: every GPU of the cluster; with --device cpu, one "
                            "per node)")
    o = p.add_argument_group("output")
    add_store_arg(o)
    o.add_argument("--out", type=Path, default=Path("."), help="where the best kernel is written (default: here)")
    o.add_argument("--json", action="store_true", help="the summary as JSON, on the last line of stdout")


SEARCH_SETTINGS = ("model", "base_url", "api_key", "reasoning_effort", "max_output_tokens", "temperature", "prices",
                   "concurrency", "llm_timeout", "llm_retries", "stop_after_failures", "strategy", "backend",
                   "rounds", "ideas", "impls", "beam", "samples", "islands", "seed", "max_candidates", "max_tokens",
                   "max_usd", "max_minutes", "device", "policy", "size", "sizes", "timing_budget", "cache_dir",
                   "profile")


def search_options(args) -> dict:
    """The search flags as kernelcraft.api's options (the API holds the policy: defaults, checks)."""
    cluster = {name: getattr(args, name) for name in ("cluster", "actors") if hasattr(args, name)}
    return {**{name: getattr(args, name) for name in SEARCH_SETTINGS}, "model": args.model or None,
            "seeds": list(args.seed_kernel), "compile_baseline": not args.no_compile_baseline, **cluster}


def exit_status(status: str, stop_reason: str | None) -> int:
    """A run's exit status: 3 when its model endpoint refused, 4 when its calls kept failing, 1 when it failed."""
    from kernelcraft.records import FAILING, REFUSED

    code = (stop_reason or "").partition(":")[0]
    if code == REFUSED:
        return EXIT_REFUSED
    if code == FAILING:
        return EXIT_FAILING
    return EXIT_OK if status != "failed" else EXIT_FAIL


# output -----------------------------------------------------------------------------------------------
def console(stderr: bool = False):
    """Rich's console (on stderr for progress); piped or redirected output (no terminal to measure, no COLUMNS)
    is laid out PIPED_WIDTH wide rather than rich's 80, so tables keep their columns and lines are not broken."""
    from rich.console import Console

    the_console = Console(stderr=stderr)
    if not the_console.is_terminal and "COLUMNS" not in os.environ:
        the_console = Console(stderr=stderr, width=PIPED_WIDTH)
    return the_console


_TRAILING = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)$")  # spaces at a line's end, before any closing style codes


def show(renderable, stderr: bool = False) -> None:
    """Print a rich view. On a terminal as rich lays it out; piped or redirected, without the spaces rich pads
    lines with to the layout's width (a centred title, a borderless table's last column), so each line ends
    where its text does."""
    out = console(stderr)
    if out.is_terminal:
        out.print(renderable)
        return
    with out.capture() as captured:
        out.print(renderable)
    stream = sys.stderr if stderr else sys.stdout
    stream.write("".join(_TRAILING.sub(r"\1", line) + "\n" for line in captured.get().splitlines()))
    stream.flush()


def print_run(outcome, as_json: bool, error_said: bool = False) -> None:
    """A run's summary (a search.RunOutcome); `error_said`: the caller says the run's error on its own line, so
    the view leaves it out."""
    import json

    if as_json:
        print(json.dumps(outcome.to_dict()))
        return
    from kernelcraft.report.terminal import run_view

    show(run_view(outcome, show_error=not error_said))
