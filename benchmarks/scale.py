"""Candidates judged per minute on a Ray cluster with 1, 2, … verifier actors, against this machine's verifier
judging the same candidates directly (the cost of going through Ray per candidate).

    PYTHONPATH=src python benchmarks/scale.py level1/softmax --device cuda --actors 1 --candidates 24 --out s.json
    PYTHONPATH=src python benchmarks/scale.py level1/relu --device cpu --actors 1,2 --candidates 8 --out s.json
    PYTHONPATH=src python benchmarks/scale.py level1/softmax --device cuda --actors 1,4 --per-actor 48 --no-direct ...
    PYTHONPATH=src python benchmarks/scale.py shared/kernelbench/level1 --bench 12 --device cuda --actors 1,2 ...
    PYTHONPATH=src python benchmarks/scale.py - --spawn 1,4,8,16 --out s.json
    PYTHONPATH=src python benchmarks/scale.py - --spawn 4,16 --worker-start spawn --out s.json

Jobs mode (a problem): the built-in engineer's kernels for it (each of its ideas, repeated up to --candidates,
each copy a distinct source), judged once directly (`Verifier`) and once per actor count (`ClusterVerifier`
through `--cluster`, default `local`). Each pass first warms every device (a worker started, the baselines
measured), then times `evaluate_many` over the candidates: candidates per minute = N / wall. Overhead per
candidate = (1-actor wall - direct wall) / N.
Bench mode (--bench K, a directory): `kernelcraft bench` over its first K problems (built-in engineer, --rounds),
once per actor count; candidates judged per minute over the bench's wall time, and over the time after its start
(Ray and its actors up, every problem admitted: until the first run begins), and the mean phases of its candidates.
Each pass has a Triton cache of its own, so every pass compiles the same kernels. --runs-at-once K: K runs at once
per actor (the bench's default is three per GPU). --skip S: the K problems after the first S (the directory's order),
so a pass too long for one sitting is measured as parts, their judged candidates and walls after the start summed.

Spawn mode (--spawn N,M,…; no Ray): N verifier workers started at once, spread over the visible GPUs as each
device's supervisor starts them, then M, …: each one's time from its start to its handshake, and where that time
went inside it (the worker's own marks: interpreter, torch import, CUDA init, profiler warm-up, ready). It says what a
worker's start costs when several devices' supervisors start workers together. --worker-start (every mode): "fork"
(the verifier's default: workers forked from one fork server per device, started first and timed apart) or "spawn"
(a new interpreter per worker).

On one machine's CPU, actors share its cores and the device's timing lock (one timing phase at a time per
device: the CPU is one device), so CPU rates do not scale with actors; GPUs each have their own lock.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402
from provenance import code as provenance_code  # noqa: E402

from kernelcraft import api  # noqa: E402
from kernelcraft.candidate import Candidate  # noqa: E402
from kernelcraft.inputs import as_problem, problem_set  # noqa: E402
from kernelcraft.propose.base import Request  # noqa: E402
from kernelcraft.propose.builtin.proposer import BuiltinProposer  # noqa: E402
from kernelcraft.propose.parse import parse_ideas, parse_kernel  # noqa: E402
from kernelcraft.verify import Job, TimingConfig, Verifier, VerifyConfig  # noqa: E402


def builtin_candidates(problem, backend: str, device: str, count: int) -> list[Candidate]:
    """The built-in engineer's kernels for `problem`, one per idea it offers, repeated to `count` (distinct sources:
    a comment numbers each copy)."""
    proposer = BuiltinProposer(device)
    ideas, _ = parse_ideas(proposer.ask(Request("ideas", problem, backend, [], count=16)).text, 16)
    sources = []
    for idea in ideas:
        answer = proposer.ask(Request("implement", problem, backend, [], idea=idea))
        parsed = parse_kernel(answer.text or "")
        if parsed.source:
            sources.append(parsed.source)
    if not sources:
        raise SystemExit(f"the built-in engineer has no {backend} kernel for {problem.name}")
    return [Candidate(f"{sources[i % len(sources)]}\n# copy {i}\n", f"c{i:03d}", backend) for i in range(count)]


def timed_pass(verifier, problem, candidates, warm: int) -> dict:
    """Warm each device (`warm` jobs at once), then judge the candidates; wall time and verdicts. The steady rate
    is that of the second half of the candidates (from the moment half were judged to the last): the first half
    holds each device's first, cold worker and the pipeline filling."""
    verifier.evaluate_many([Job(problem, c) for c in candidates[:warm]])
    done: list[float] = []
    t0 = time.perf_counter()
    results = verifier.evaluate_many([Job(problem, c) for c in candidates],
                                     on_result=lambda i, r: done.append(time.perf_counter() - t0))
    wall = time.perf_counter() - t0
    done.sort()
    half = len(done) // 2
    span = done[-1] - done[half - 1] if half >= 1 else 0.0
    steady = 60 * (len(done) - half) / span if span > 0 else None
    statuses = {}
    for r in results:
        statuses[str(r.status)] = statuses.get(str(r.status), 0) + 1
    usage = verifier.usage()
    return {"candidates": len(candidates), "mean_phases_s": mean_phases(results),
            "baselines_remeasured": remeasured(results), "wall_s": round(wall, 3),
            "per_minute": round(60 * len(candidates) / wall, 2),
            "steady_per_minute": round(steady, 2) if steady else None, "done_s": [round(t, 3) for t in done],
            "seconds_per_candidate": round(wall / len(candidates), 4), "statuses": statuses,
            "median_result_wall_s": round(statistics.median(r.wall_seconds for r in results), 4),
            "devices": usage}


def jobs_mode(args, config: VerifyConfig, record: dict) -> dict:
    from kernelcraft.cluster import ClusterVerifier

    problem = as_problem(args.problem)
    count = max(args.candidates, args.per_actor * max(args.actors)) if args.per_actor else args.candidates
    candidates = builtin_candidates(problem, args.backend, args.device, count)
    out = {"problem": problem.name, "backend": args.backend, "passes": []}
    local_device = "cuda:0" if args.device == "cuda" else "cpu"
    if not args.no_direct:
        with Verifier(local_device, config) as direct:
            out["direct"] = timed_pass(direct, problem, candidates[:args.per_actor or args.candidates], 1)
            print(f"direct: {out['direct']['per_minute']} candidates/min", file=sys.stderr)
    for n in args.actors:
        with ClusterVerifier(args.cluster, args.device, config, actors=n) as cluster:
            if len(cluster.devices) < n:
                print(f"{n} actors asked, {len(cluster.devices)} up: skipped", file=sys.stderr)
                continue
            judged = candidates[:args.per_actor * n] if args.per_actor else candidates[:args.candidates]
            # warm with two per actor: pick sends a second job where the first went, so N would leave actors cold
            p = timed_pass(cluster, problem, judged, 2 * n)
            p["actors"] = n
            out["passes"].append(p)
            print(f"{n} actor(s): {p['per_minute']} candidates/min", file=sys.stderr)
            save(args, {**record, **_derived(out)})  # what has been measured survives a pass cut short
    return _derived(out)


def _derived(out: dict) -> dict:
    """The overhead of one actor against the direct path, and each pass's rate over N x the one-actor rate."""
    one = next((p for p in out["passes"] if p["actors"] == 1), None)
    if one and "direct" in out:
        d = out["direct"]
        out["overhead_per_candidate_s"] = round((one["wall_s"] - d["wall_s"]) / d["candidates"], 4)
        out["overhead_fraction"] = round(one["wall_s"] / d["wall_s"] - 1, 4)
    if one:
        for p in out["passes"]:
            p["scaling_vs_1_actor"] = round(p["per_minute"] / (one["per_minute"] * p["actors"]), 3)
            if p.get("steady_per_minute") and one.get("steady_per_minute"):
                p["steady_scaling_vs_1_actor"] = round(
                    p["steady_per_minute"] / (one["steady_per_minute"] * p["actors"]), 3)
    return out


def save(args, record: dict) -> None:
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")


def bench_mode(args, record: dict) -> dict:
    """Each pass saved as it ends (a later pass cut short by a time limit loses only itself)."""
    out = {"suite": args.problem, "problems": args.bench, "skip": args.skip, "rounds": args.rounds, "passes": []}
    chosen = [str(p.path) for p in problem_set(args.problem)[args.skip:args.skip + args.bench]]
    for n in args.actors:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            first: list[float] = []  # when the first run began: the cluster up, its actors started

            def heard(kind: str, info: dict) -> None:
                if kind == "problem" and not first:
                    first.append(time.perf_counter() - t0)

            # Every pass compiles its kernels afresh: with one Triton cache, the passes after the first would find
            # the first's kernels compiled (about a second a candidate) and look faster for it.
            before = os.environ.get("TRITON_CACHE_DIR")
            os.environ["TRITON_CACHE_DIR"] = str(Path(tmp) / "triton")  # the actors' workers inherit it
            try:
                summary = api.bench(chosen, rounds=args.rounds, ideas=args.ideas,
                                    runs_at_once=args.runs_at_once and args.runs_at_once * n,
                                    on_event=heard, device=args.device, cluster=args.cluster, actors=n,
                                    store=Path(tmp) / "runs.db", backend=args.backend, timing_budget=args.timing_budget,
                                    compile_baseline=not args.no_compile_baseline, cache_dir=Path(tmp) / "cache")
            finally:
                os.environ.pop("TRITON_CACHE_DIR") if before is None else os.environ.update(TRITON_CACHE_DIR=before)
            wall = time.perf_counter() - t0
            results = bench_results(Path(tmp) / "runs.db")
            idle = idle_breakdown(Path(tmp) / "runs.db", len(summary["devices"]), len(summary["rows"]))
        judged = sum(d["judged"] for d in summary["devices"])
        start = first[0] if first else 0.0
        out["passes"].append({"actors": n, "runs_at_once": summary["runs_at_once"], "wall_s": round(wall, 2),
                              "judged": judged,
                              "per_minute": round(60 * judged / wall, 2), "start_s": round(start, 2),
                              "per_minute_after_start": round(60 * judged / (wall - start), 2),
                              "correct": summary["metrics"]["correct"], "mean_phases_s": mean_phases(results),
                              "baselines_remeasured": remeasured(results), "idle": idle,
                              "rows": [{k: r.get(k) for k in ("problem", "status", "correct", "speedup_eager",
                                                              "candidates")} for r in summary["rows"]],
                              "devices": summary["devices"]})
        save(args, {**record, **out})
        print(f"bench, {n} actor(s): {out['passes'][-1]['per_minute']} candidates/min "
              f"({out['passes'][-1]['per_minute_after_start']} after the {start:.1f} s start); "
              f"idle device-seconds {idle.get('idle_device_s')}", file=sys.stderr)
    return out


def bench_results(db: Path) -> list:
    """Every Result the bench in `db` judged."""
    from kernelcraft.store import Store

    store = Store(db)
    try:
        return [r for run in store.runs(limit=100_000) for r in store.results(run.id).values()]
    finally:
        store.close()


def idle_breakdown(db: Path, devices: int, problems: int, step: float = 0.05) -> dict:
    """Where the devices' idle time went, from the store's clocks: from the first run's start to the last result,
    at each moment, how many candidates were being judged (a result's last `wall_seconds` before it was stored)
    and how many were proposed but not yet being judged. Idle device-seconds while some waited (queued behind a
    target's measurement or a build) and while none did, the latter split by whether runs were still to start
    (held back by the runs-at-once limit) or none was (the tail: the last runs measuring their targets,
    proposing, or their rounds one after another). With each run's span: start, first candidate, last result."""
    import sqlite3

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        runs = con.execute("SELECT r.id, r.problem, r.created, min(c.created), max(x.evaluated), count(x.evaluated)"
                           " FROM runs r LEFT JOIN candidates c ON c.run_id = r.id"
                           " LEFT JOIN results x ON x.candidate_id = c.id GROUP BY r.id ORDER BY r.created").fetchall()
        rows = con.execute("SELECT c.created, r.evaluated, json_extract(r.result, '$.wall_seconds') FROM candidates c"
                           " JOIN results r ON r.candidate_id = c.id").fetchall()
    finally:
        con.close()
    if not rows or not runs:
        return {}
    begin = runs[0][2]
    starts = sorted(created for _, _, created, _, _, _ in runs)
    spans = [(created, evaluated - (wall or 0.0), evaluated) for created, evaluated, wall in rows]
    end = max(e for _, _, e in spans)
    idle = {"candidates_waiting": 0.0, "runs_to_start": 0.0, "tail": 0.0}
    judging_s, t = 0.0, begin
    while t < end:
        judging = sum(1 for _, s, e in spans if s <= t < e)
        waiting = sum(1 for c, s, _ in spans if c <= t < s)
        free = max(0, devices - judging) * step
        judging_s += min(judging, devices) * step
        started = sum(1 for s in starts if s <= t)
        idle["candidates_waiting" if waiting else "runs_to_start" if started < problems else "tail"] += free
        t += step
    return {"span_s": round(end - begin, 2), "judging_device_s": round(judging_s, 1),
            "idle_device_s": {k: round(v, 1) for k, v in idle.items()},
            "runs": [{"problem": problem, "start_s": round(created - begin, 2),
                      "first_candidate_s": round(first - begin, 2) if first else None,
                      "last_result_s": round(last - begin, 2) if last else None, "judged": judged}
                     for _, problem, created, first, last, judged in runs]}


def mean_phases(results: list) -> dict:
    """The mean of each phase (Result.phases) over the results."""
    names = sorted({k for r in results for k in r.phases})
    return {k: round(statistics.mean(r.phases.get(k, 0.0) for r in results), 4) for k in names} if results else {}


def remeasured(results: list) -> int:
    """Results whose timing measured the baselines again (eager beside the candidate drifted): a long "time" phase."""
    return sum(any(n.startswith("baseline re-measured") for n in r.notes) for r in results)


def spawn_mode(args) -> dict:
    from kernelcraft.verify.forkserver import ForkServer
    from kernelcraft.verify.process import WorkerProcess, sandbox_paths, worker_environment

    gpus = torch.cuda.device_count() if args.device == "cuda" else 0
    cache = tempfile.mkdtemp(prefix="kc-spawn-")
    out = {"gpus": gpus, "passes": []}
    envs = [{"KERNELCRAFT_CACHE": cache, "CUDA_VISIBLE_DEVICES": str(g) if gpus else ""} for g in range(max(gpus, 1))]
    servers = []
    if args.worker_start == "fork":  # one fork server per device, as each device's supervisor has; started first
        t0 = time.perf_counter()
        servers = [ForkServer(worker_environment(env)[0], *sandbox_paths([Path(cache)])) for env in envs]
        out["servers_ready_s"] = round(time.perf_counter() - t0, 3)
        out["server_ready_s"] = [s.info.get("ready_s") for s in servers]
    for n in args.spawn:
        t0 = time.perf_counter()
        workers = []
        for i in range(n):
            g = i % len(envs)
            workers.append(WorkerProcess(envs[g], writable=[Path(cache)], cuda_index=g if gpus else None,
                                         server=servers[g] if servers else None))
        ready, marks = [], []
        for w in workers:  # every worker's handshake; each is timed from the moment all were started
            info = w.ready()
            ready.append(time.perf_counter() - t0)
            marks.append(info.get("start_marks_s", {}))
        for w in workers:
            w.kill()
        keys = sorted({k for m in marks for k in m}, key=lambda k: statistics.mean(m.get(k, 0) for m in marks))
        out["passes"].append({"workers": n, "all_ready_s": round(max(ready), 3),
                              "mean_ready_s": round(statistics.mean(ready), 3),
                              "mean_marks_s": {k: round(statistics.mean(m.get(k, 0.0) for m in marks), 3) for k in keys}})
        print(f"{n} workers at once: all ready in {max(ready):.2f} s, marks {out['passes'][-1]['mean_marks_s']}",
              file=sys.stderr)
    for server in servers:
        server.close()
    return out


def provenance(args) -> dict:
    try:
        import ray
    except ImportError:  # spawn mode needs no Ray
        ray = None

    return {"date": datetime.date.today().isoformat(), "torch": torch.__version__, "ray": ray.__version__ if ray else None,
            "device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
            "cpus": os.cpu_count(), "code": provenance_code(), "cluster": args.cluster,
            "method": "wall clock of Verifier.evaluate_many / ClusterVerifier.evaluate_many after a warm-up pass"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem", help="a problem (jobs mode), or a suite/directory with --bench")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"])
    ap.add_argument("--actors", default="1", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--cluster", default="local")
    ap.add_argument("--candidates", type=int, default=16)
    ap.add_argument("--per-actor", type=int, default=None, metavar="K",
                    help="jobs mode: K candidates per actor in each pass (N actors judge K x N), in place of --candidates")
    ap.add_argument("--no-direct", action="store_true", help="jobs mode: skip the pass on this machine's verifier")
    ap.add_argument("--backend", default="triton")
    ap.add_argument("--bench", type=int, default=None, metavar="K", help="bench mode over the first K problems")
    ap.add_argument("--skip", type=int, default=0, metavar="S", help="bench mode: the --bench K problems after the first S")
    ap.add_argument("--runs-at-once", type=int, default=None, metavar="K",
                    help="bench mode: K runs at once per actor (default: the bench's own, three per GPU)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ideas", type=int, default=4)
    ap.add_argument("--timing-budget", type=float, default=2.0)
    ap.add_argument("--no-compile-baseline", action="store_true")
    ap.add_argument("--standby", type=int, default=None,
                    help="workers each supervisor starts ahead (VerifyConfig.standby_workers; an actor's depth follows)")
    ap.add_argument("--spawn", default=None, type=lambda s: [int(x) for x in s.split(",")],
                    help="spawn mode: start this many workers at once, then the next count (no Ray)")
    ap.add_argument("--worker-start", default="fork", choices=["spawn", "fork"],
                    help="how workers start (VerifyConfig.worker_start): forked from a fork server, or a new interpreter")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if args.standby is not None and args.bench:
        ap.error("--standby applies to jobs mode (a bench takes the verifier's defaults)")
    config = VerifyConfig(size="auto", compile_baseline=not args.no_compile_baseline,
                          timing=TimingConfig(budget_s=args.timing_budget),
                          cache_dir=Path(tempfile.mkdtemp(prefix="kc-scale-")))
    if args.standby is not None:
        config.standby_workers = args.standby
    config.worker_start = args.worker_start
    record = {**provenance(args), "mode": "spawn" if args.spawn else "bench" if args.bench else "jobs",
              "standby_workers": config.standby_workers, "worker_start": config.worker_start}
    if args.spawn:
        record.update(spawn_mode(args))
    else:
        record.update(bench_mode(args, record) if args.bench else jobs_mode(args, config, record))
    save(args, record)
    print(json.dumps({k: v for k, v in record.items() if k not in ("passes", "direct")}, indent=2))


if __name__ == "__main__":
    main()
