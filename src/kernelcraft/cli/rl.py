"""`kernelcraft rl score ROWS COMPLETIONS`: score a model's completions against RL rows, as a trainer's reward
function would (docs/rl.md). Progress goes to stderr; with --json stdout is one JSON object (every score, in the
order of COMPLETIONS, and the batch's throughput)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from kernelcraft.cli.common import EXIT_OK, Parser, UsageError, usage_errors, whole

NAME = "rl"


def add_parser(sub) -> None:
    rl = sub.add_parser(NAME, help="kernelcraft as an RL reward: score completions against RL rows")
    rlsub = rl.add_subparsers(dest="action", parser_class=Parser)
    sc = rlsub.add_parser("score", help="score completions (JSONL) against rows from `export --kind rl`")
    sc.add_argument("rows", help="RL rows: the .jsonl or .parquet file `kernelcraft export --kind rl` wrote")
    sc.add_argument("completions", help="JSONL, one object a line: completion (the answer's text) and row (the "
                                        "row's extra_info.index) or problem (its name)")
    sc.add_argument("--device", default=None,
                    help="score on this device instead of the rows' (cpu, cuda; a row from a GPU run asks for cuda)")
    sc.add_argument("--cache-dir", type=Path, default=None,
                    help="verdict cache, builds and baselines (default ~/.cache/kernelcraft)")
    sc.add_argument("--no-cache", action="store_true", help="judge every kernel afresh, keep no verdicts")
    sc.add_argument("--shape", default=None, metavar="NAME=V,…",
                    help="reward-shape parameters, e.g. speed_weight=0.5,max_speedup=20 (docs/rl.md)")
    sc.add_argument("--cluster", default=None, metavar="local|auto|ADDRESS",
                    help="judge on a Ray cluster, one verifier actor per GPU (default: $KERNELCRAFT_CLUSTER, else here)")
    sc.add_argument("--actors", type=whole(1), default=None, metavar="N", help="with --cluster: at most N verifier actors")
    sc.add_argument("--out", type=Path, default=None, help="also write the scores here, one JSON object a line")
    sc.add_argument("--json", action="store_true", help="one JSON object on stdout: scores and stats")


def run(args) -> int:
    from kernelcraft import api

    if args.action != "score":
        raise UsageError("kernelcraft rl: say what to do: kernelcraft rl score ROWS COMPLETIONS")
    shape = parse_shape(args.shape)
    progress = _Progress()
    with usage_errors("rl score"):
        batch = api.rl_score(args.rows, args.completions, device=args.device, cache_dir=args.cache_dir, shape=shape,
                             cache=not args.no_cache, cluster=args.cluster, actors=args.actors,
                             on_event=progress.event, on_score=progress.scored)
    progress.end()
    if args.out:
        args.out.write_text("".join(json.dumps({"index": i, **s.to_dict()}) + "\n" for i, s in enumerate(batch.scores)))
    if args.json:
        print(json.dumps({"scores": [{"index": i, **s.to_dict()} for i, s in enumerate(batch.scores)],
                          "stats": batch.stats()}))
        return EXIT_OK
    stats = batch.stats()
    tiers = ", ".join(f"{k} {v}" for k, v in stats["tiers"].items())
    print(f"scored {stats['completions']} completion(s) in {stats['seconds']:.1f} s ({stats['per_minute']:.1f}/min); "
          f"mean score {stats['mean_score']}; {tiers}; cache hits {stats['cache_hits']}, verified {stats['verified']}")
    return EXIT_OK


def parse_shape(text: str | None) -> dict | None:
    """`speed_weight=0.5,flagged=floor` as the shape's fields: numbers as numbers, true/false as booleans."""
    if not text:
        return None
    out = {}
    for part in text.split(","):
        name, eq, value = part.partition("=")
        if not eq or not name.strip():
            raise UsageError(f"kernelcraft rl score: --shape {part!r}: give NAME=VALUE pairs, comma-separated")
        value = value.strip()
        if value.lower() in ("true", "false"):
            out[name.strip()] = value.lower() == "true"
            continue
        try:
            out[name.strip()] = float(value)
        except ValueError:
            out[name.strip()] = value
    return out


class _Progress:
    """A line on stderr as scores come in (every tenth of the batch), and where the verifiers start."""

    def __init__(self):
        self.total = 0
        self.done = 0
        self._lock = threading.Lock()

    def event(self, kind: str, info: dict) -> None:
        if kind == "rl_score":
            self.total = info["completions"]
            print(f"scoring {info['completions']} completion(s) against {info['rows']} row(s)…", file=sys.stderr)
        elif kind == "verifier":
            print(f"verifier on {', '.join(info['devices'])} ({info['settings']})", file=sys.stderr)
        elif kind == "lock_wait":
            print(info.get("message") or "waiting for the device", file=sys.stderr)  # it says what it waits for

    def scored(self, index: int, score) -> None:
        with self._lock:
            self.done += 1
            step = max(1, self.total // 10)
            if self.done % step == 0 or self.done == self.total:
                print(f"  {self.done}/{self.total} scored", file=sys.stderr)

    def end(self) -> None:
        sys.stderr.flush()
