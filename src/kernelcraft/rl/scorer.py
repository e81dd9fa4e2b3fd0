"""Scoring completions: parse each as any proposer answer is parsed, verify the kernel in the verifier's pool,
shape the verdict into a Score. Many completions go in at once (`submit` returns a future at once; builds run
ahead in the verifier's CPU pool, one supervisor per device judges in order), verdicts are cached by source hash,
and the same kernel sampled twice in one step is judged once.

The verifier is any verifier (verify/front.py's `JobFront`: this machine's, or a cluster's, which spreads the
same jobs over a Ray cluster). Without one, a local Verifier is made
per verifier setting the rows ask for and kept for every later call of that setting. Candidate code runs only in
the verifier's worker subprocesses: this module reads the answer as text, compiles it to check its syntax (which
runs nothing), and hands it on."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from kernelcraft import syntax
from kernelcraft.candidate import Candidate
from kernelcraft.errors import ConfigError, KernelcraftError
from kernelcraft.problems.problem import MAX_SOURCE_BYTES
from kernelcraft.propose.feedback import CANDIDATE_FILE
from kernelcraft.propose.parse import parse_kernel
from kernelcraft.result import Result, Status
from kernelcraft.rl.cache import FILE, VerdictCache
from kernelcraft.rl.shape import RewardShape, Score, score_verdict
from kernelcraft.rl.task import Settings, Task
from kernelcraft.verify import Job, JobFront
from kernelcraft.verify.trust import Trust, trusted_dir

DEFAULT_CACHE = Path.home() / ".cache" / "kernelcraft"


@dataclass
class Judged:
    """What one completion became before shaping: the kernel's source (None: no usable kernel, `parse_error`
    says why) and the verifier's verdict."""

    source: str | None
    parse_error: str | None
    result: Result | None
    cached: bool = False


@dataclass
class Batch:
    """Scores of a batch, in the order given, and how fast they came."""

    scores: list[Score]
    seconds: float
    cache_hits: int = 0
    verified: int = 0  # sent to the verifier
    joined: int = 0  # the same kernel as another in flight: judged once
    malformed: int = 0  # no usable kernel: nothing to verify

    @property
    def per_minute(self) -> float:
        return 60.0 * len(self.scores) / self.seconds if self.seconds > 0 else 0.0

    def stats(self) -> dict:
        n = len(self.scores)
        return {"completions": n, "seconds": round(self.seconds, 3), "per_minute": round(self.per_minute, 2),
                "cache_hits": self.cache_hits, "cache_hit_rate": round(self.cache_hits / n, 4) if n else 0.0,
                "verified": self.verified, "joined": self.joined, "malformed": self.malformed,
                "mean_score": round(sum(s.score for s in self.scores) / n, 4) if n else None,
                "tiers": {t: sum(s.tier == t for s in self.scores) for t in sorted({s.tier for s in self.scores})}}

    def to_dict(self) -> dict:
        return {"scores": [s.to_dict() for s in self.scores], "stats": self.stats()}


@dataclass
class _Counts:
    cache_hits: int = 0
    verified: int = 0
    joined: int = 0
    malformed: int = 0


def _parses(source: str) -> bool:
    try:
        syntax.parse(source)
    except SyntaxError:
        return False
    return True


class Scorer:
    def __init__(self, verifier: JobFront | None = None, *, shape: RewardShape | dict | None = None, cache_dir: str | Path | None = None,
                 device: str | None = None, cache: bool = True, build_workers: int | None = None,
                 on_event: Callable[[str, dict], None] | None = None, cluster: str | None = None,
                 actors: int | None = None):
        """`verifier`: judges every task under its own settings (not closed here: its owner closes it); None:
        a local Verifier per setting the rows ask for, made on first need. `device` overrides the rows' device
        (`cpu` to score on a machine with no GPU). `cache_dir`: the verdict cache's home and the local
        verifiers' (builds, baselines); default ~/.cache/kernelcraft. `cache=False` keeps no verdicts.
        `cluster` (local, auto or an address; default $KERNELCRAFT_CLUSTER): the verifiers made here judge on that
        Ray cluster, one actor per GPU (`actors` caps them), instead of this machine."""
        self.shape = RewardShape.of(shape)
        self.cache_dir = Path(cache_dir) if cache_dir else DEFAULT_CACHE
        self.device = device
        self.on_event = on_event or (lambda kind, info: None)
        self.build_workers = build_workers
        if verifier is not None and not isinstance(verifier, JobFront):
            raise ConfigError(f"the scorer's verifier must be a kernelcraft.verify.JobFront, not {type(verifier).__name__}")
        self._given = verifier
        from kernelcraft.cluster import cluster_address

        self.cluster, self.actors = cluster_address(cluster), actors
        if actors is not None and self.cluster is None:
            raise ConfigError("--actors: verifier actors run on a cluster; add --cluster local|auto|ADDRESS")
        self._verifiers: dict[Settings, JobFront] = {}
        trusted = trusted_dir(self.cache_dir)  # hidden from candidates, its rows sealed (verify/trust.py)
        self._cache = VerdictCache(trusted / FILE, Trust(trusted)) if cache else None
        self._inflight: dict[tuple, Future] = {}
        self._lock = threading.Lock()
        self.counts = _Counts()

    # the one entry point -------------------------------------------------------------------------------
    def submit(self, task: Task | dict, completion: str) -> Future:
        """Score one completion for a task (a Task, or an RL row); the future holds its Score. Returns at once:
        the verdict comes from the cache, or from the verifier once it has judged the kernel."""
        task = self.task(task)
        about = dict(problem=task.problem.name, best_known_speedup=task.best_known(self.shape.baseline))
        out: Future = Future()
        judged = self._judge(task, completion)

        def shaped(fut: Future) -> None:
            try:
                j: Judged = fut.result()
                sha = hashlib.sha256(j.source.encode()).hexdigest()[:16] if j.source else None
                out.set_result(score_verdict(self.shape, j.result, j.parse_error, candidate_sha=sha, cached=j.cached,
                                             **about))
            except BaseException as exc:  # noqa: BLE001 - surfaced through the future
                out.set_exception(exc)

        judged.add_done_callback(shaped)
        return out

    def score(self, task: Task | dict, completion: str) -> Score:
        return self.submit(task, completion).result()

    async def ascore(self, task: Task | dict, completion: str) -> Score:
        """`score` for an event loop (verl's async reward loop, its interactions): the wait does not block it."""
        return await asyncio.wrap_future(self.submit(task, completion))

    def score_batch(self, items: Iterable[tuple], on_score: Callable[[int, Score], None] | None = None) -> Batch:
        """Score (task or row, completion) pairs, all submitted at once; scores in the order given.
        `on_score(index, score)` hears each as it comes (for progress)."""
        start, before = time.perf_counter(), _Counts(**vars(self.counts))
        futures = [self.submit(task, completion) for task, completion in items]
        if on_score:
            for i, fut in enumerate(futures):
                fut.add_done_callback(lambda f, i=i: f.exception() is None and on_score(i, f.result()))
        scores = [f.result() for f in futures]
        after = self.counts
        return Batch(scores, time.perf_counter() - start, after.cache_hits - before.cache_hits,
                     after.verified - before.verified, after.joined - before.joined, after.malformed - before.malformed)

    def task(self, task: Task | dict) -> Task:
        return task if isinstance(task, Task) else Task.from_row(task, device=self.device)

    # judging --------------------------------------------------------------------------------------------
    def _judge(self, task: Task, completion) -> Future:
        source, error = self._kernel(task, completion)
        if error:
            with self._lock:
                self.counts.malformed += 1
            return _done(Judged(source, error, None))
        settings, verifier, tag = self._verifier(task)
        syntax = _syntax_error(task, source, settings)
        if syntax is not None:  # a Python file that does not parse: a build that failed, judged here unrun
            return _done(Judged(source, None, syntax))
        key = (task.sha, hashlib.sha256(source.encode()).hexdigest(), f"{settings.key()}|{tag}")
        with self._lock:
            joined = self._inflight.get(key)
            if joined is not None:
                self.counts.joined += 1
                return _chain(joined, lambda r: Judged(source, None, r))
        cached = self._cache.get(*key) if self._cache is not None else None
        if cached is not None:
            with self._lock:
                self.counts.cache_hits += 1
            return _done(Judged(source, None, cached, cached=True))
        with self._lock:
            joined = self._inflight.get(key)  # another thread submitted it while the cache was read
            if joined is not None:
                self.counts.joined += 1
                return _chain(joined, lambda r: Judged(source, None, r))
            self.counts.verified += 1
            candidate = Candidate(source, f"rl:{key[1][:12]}")
            verdict = self._inflight[key] = verifier.submit(Job(task.problem, candidate))

        def keep(fut: Future) -> None:
            try:
                if self._cache is not None and fut.exception() is None:
                    self._cache.put(*key, fut.result())
            finally:
                with self._lock:
                    self._inflight.pop(key, None)

        verdict.add_done_callback(keep)
        return _chain(verdict, lambda r: Judged(source, None, r))

    def _kernel(self, task: Task, completion) -> tuple[str | None, str | None]:
        """The kernel source in a completion, or why there is none (parse_kernel's errors, and the checks a
        file handed to `kernelcraft eval` gets before anything runs)."""
        if not isinstance(completion, str) or not completion.strip():
            return None, "no_answer"
        answer = parse_kernel(completion)
        if answer.error:
            return None, answer.error
        source = answer.source
        if len(source.encode()) > MAX_SOURCE_BYTES:
            return None, "source_too_large"
        if "\0" in source:
            return None, "not_python"
        if self.shape.require_backend and task.backend and _parses(source):  # broken Python is no other backend:
            # the verifier's syntax check judges it (compile_error, a rung above a malformed answer)
            backend = Candidate(source).backend
            if backend != task.backend:
                return source, f"wrong_backend ({backend}, asked for {task.backend})"
        return source, None

    def _verifier(self, task: Task) -> tuple[Settings, JobFront, str]:
        """The verifier for a task, the settings it judges under and its device tag (both in the cache's key)."""
        if self._given is not None:
            return _settings_of(self._given), self._given, _device_tag(self._given)
        with self._lock:
            verifier = self._verifiers.get(task.settings)
            if verifier is None:
                from kernelcraft.verify import Verifier

                config = task.settings.verify_config(self.cache_dir)
                try:
                    if self.cluster:
                        from kernelcraft.cluster import ClusterVerifier

                        kind = task.settings.device.split(":")[0]  # a cluster judges on every GPU it has
                        verifier = ClusterVerifier(self.cluster, kind, config, self.actors, on_event=self.on_event)
                    else:
                        verifier = Verifier(task.settings.device, config, self.build_workers, on_event=self.on_event)
                except KernelcraftError:  # a cluster that cannot serve: said as it is
                    raise
                except ValueError as exc:  # a device this machine does not have
                    raise ConfigError(f"{exc} (the row asks for device {task.settings.device}; pass device= to "
                                      "score elsewhere)") from None
                self._verifiers[task.settings] = verifier
                self.on_event("verifier", {"settings": task.settings.describe(), "key": task.settings.key(),
                                            "devices": list(verifier.devices)})
        return task.settings, verifier, _device_tag(verifier)

    # lifetime -------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the verifiers made here (a given one is its owner's) and the cache."""
        with self._lock:
            made, self._verifiers = list(self._verifiers.values()), {}
        for verifier in made:
            verifier.close()
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    def __enter__(self) -> "Scorer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _syntax_error(task: Task, source: str, settings: Settings) -> Result | None:
    """A verdict for a kernel file Python cannot parse, given without running anything (compile() only
    parses): a build that failed, as the worker's import would have said it, one tier below a wrong kernel."""
    try:
        compile(source, CANDIDATE_FILE, "exec")
        return None
    except SyntaxError as exc:
        line = f"{CANDIDATE_FILE}:{exc.lineno}: SyntaxError: {exc.msg}"
        result = Result(task.problem.name, "candidate", Candidate(source).backend, policy=settings.policy,
                        compile_log=line + (f"\n    {exc.text.rstrip()}" if exc.text else ""))
        return result.fail(Status.COMPILE_ERROR, "syntax_error", line)


def _settings_of(verifier: JobFront) -> Settings:
    """The settings a given verifier judges under, read off its VerifyConfig."""
    config = verifier.config
    return Settings(device="cuda" if any(str(d).startswith("cuda") for d in verifier.devices) else "cpu",
                    policy=config.policy, size=config.size, trials=config.trials,
                    compile_baseline=config.compile_baseline, timing_budget_s=config.timing.budget_s)


def _device_tag(verifier: JobFront) -> str:
    """What a verdict's speed depends on besides the settings: the devices' names (a verdict on a CPU is no
    verdict on an H100)."""
    return ",".join(sorted(set(map(str, verifier.device_names())))) or "unknown"


def _done(value) -> Future:
    fut: Future = Future()
    fut.set_result(value)
    return fut


def _chain(fut: Future, then: Callable) -> Future:
    """A future of `then(fut.result())`."""
    out: Future = Future()

    def done(f: Future) -> None:
        try:
            out.set_result(then(f.result()))
        except BaseException as exc:  # noqa: BLE001
            out.set_exception(exc)

    fut.add_done_callback(done)
    return out
