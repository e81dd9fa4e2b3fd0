"""The primitives every strategy is written in: ask, implement (ask → parse → verify), select, stop. (Past ~400
lines for a reason: the primitives share one lock, one journal of keyed steps and one set of counters; split, each
part would reach into the others' state.)

Every step carries a key the strategy derives deterministically ("r02/i01/m00"); each step's outcome
is written to the store under that key as it happens, and a step whose key is stored is replayed
from the store instead of being asked or evaluated again. So a run killed at any moment and resumed
asks nothing twice, evaluates nothing twice, and (given the same answers) ends where an uninterrupted
run would. Ordering never depends on arrival: selections rank by time, a later candidate (by round,
then key) passing an earlier one only when faster beyond the measured spread (ranking.py).

Overlap: proposer calls run in a thread pool; each answer's kernel goes to the verifier the moment it
is parsed, so the GPU works while other calls are still out.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Callable

from kernelcraft.candidate import Candidate
from kernelcraft.problems import Problem
from kernelcraft.propose.base import Answer, FatalProposerError, Idea, Kernel, Proposer, Request, TriedIdea, Turn, Usage
from kernelcraft.propose.feedback import OUTPUT_LIMIT
from kernelcraft.propose.parse import parse_ideas, parse_kernel
from kernelcraft.ranking import ranked
from kernelcraft.records import NO_ANSWER, unevaluated_status
from kernelcraft.result import INTERRUPTED
from kernelcraft.search.history import round_failures, run_target, tried_ideas
from kernelcraft.search.profiling import RunProfiler
from kernelcraft.search.records import Cand, Counters
from kernelcraft.search.records import done as _done
from kernelcraft.spec import RunConfig
from kernelcraft.store import Store
from kernelcraft.target import Target
from kernelcraft.verify import Job, JobFront


class Engine:
    def __init__(self, store: Store, run_id: str, problem: Problem, proposer: Proposer, verifier: JobFront,
                 config: RunConfig, on_event: Callable[[str, dict], None] | None = None,
                 cancel: threading.Event | None = None, earlier_s: float = 0.0):
        """`cancel`, once set, stops the run as an interrupt does (a bench's runs in other threads than the one
        Ctrl-C reaches): no new work, what is in flight finishes and is stored. `earlier_s`: the seconds a resumed
        run ran before (its wall time and wall budget count them)."""
        self.cancel = cancel
        self.store, self.run_id, self.problem = store, run_id, problem
        self.proposer, self.verifier, self.config = proposer, verifier, config
        self.on_event = on_event or (lambda kind, data: None)
        self.count = Counters()
        self.cands: dict[str, Cand] = {}
        self.round = 0
        self.stop_reason: str | None = None
        self.fatal: str | None = None  # the endpoint refused (bad key, unknown model): no call can succeed
        self.failing: str | None = None  # the last error of `config.stop_after_failures` failed calls in a row
        self._failed_in_a_row = 0
        self._lock = threading.RLock()
        self._by_source: dict[str, Future] = {}  # source -> its verdict (a Result), so a repeated kernel runs once
        self._pool = ThreadPoolExecutor(max(1, config.concurrency), thread_name_prefix="propose")
        self._inflight: set[Future] = set()
        self._session = time.monotonic()
        self._started = self._session - max(earlier_s, 0.0)  # the run's start, its earlier sessions counted
        self._busy0 = verifier.busy_seconds()
        self._target_lock = threading.Lock()
        self._target: Target | None = None
        self._target_done = False
        self.profiler = RunProfiler(store, run_id, problem, verifier, self.on_event)
        self._deadline: threading.Timer | None = None
        self._closed = False
        self._verdict_s: list[float] = []  # the wall seconds of each verdict this run has had
        self._arm_deadline()

    def _last_call_s(self) -> float | None:
        """When, in seconds from the start, the run stops taking new work: at the wall budget, less the median time
        a verdict of this run has taken (a verdict started later would end past the budget); None: no wall
        budget."""
        wall = self.config.budget.wall_s
        if wall is None:
            return None
        with self._lock:
            walls = sorted(self._verdict_s)
        return wall - (walls[len(walls) // 2] if walls else 0.0)

    def _wall_end(self) -> float | None:
        """The run's wall budget's end as a time.time() (None: no wall budget): its verdicts wait for a device held by
        another process no longer than that."""
        wall = self.config.budget.wall_s
        return None if wall is None else time.time() + wall - (time.monotonic() - self._started)

    def _arm_deadline(self) -> None:
        """(Re)set the timer that ends the run at its last call, even while it only waits."""
        at = self._last_call_s()
        if at is None:
            return
        timer = threading.Timer(max(at - (time.monotonic() - self._started), 0.0), self._at_deadline)
        timer.daemon = True
        with self._lock:
            if self._closed:
                return
            old, self._deadline = self._deadline, timer
        if old is not None:
            old.cancel()
        timer.start()

    def close(self, cancel: bool = False) -> None:
        with self._lock:
            self._closed = True
        if self._deadline is not None:
            self._deadline.cancel()
        self._pool.shutdown(wait=not cancel, cancel_futures=cancel)

    def _at_deadline(self) -> None:
        """The wall budget is spent, or what is left of it is less than a verdict takes: no new work, and the
        evaluations still queued behind the verifier's devices are withdrawn (their candidates stay unevaluated, and
        a resumed run evaluates them); one being judged finishes. Without this a run's queue outlived its budget: at
        full sizes, a 0.5 min run took 1.5-2 min; and a verdict started just before the budget's end ran past it by
        up to a verdict (BERT's attention region on an H200: 23 s past a 103 s run)."""
        if self.stopped() != "budget_wall_time":
            return
        with self._lock:
            queued = [f for f in self._by_source.values() if not f.done()]
        withdrawn = sum(f.cancel() for f in queued)
        if withdrawn:
            with self._lock:
                self.count.withdrawn += withdrawn
            self.on_event("withdrawn", {"count": withdrawn, "reason": "budget_wall_time"})

    # budgets ----------------------------------------------------------------------------------------
    def stopped(self) -> str | None:
        """Why the run must not start new work (None while it may). Work in flight still finishes."""
        if self.stop_reason:
            return self.stop_reason
        b, c = self.config.budget, self.count
        reason = None
        if self.cancel is not None and self.cancel.is_set():
            reason = "interrupted"
        elif self.fatal:
            reason = f"proposer_error: {self.fatal}"
        elif self.failing:
            reason = f"proposer_failing: {self.failing}"
        elif b.candidates is not None and c.candidates >= b.candidates:
            reason = "budget_candidates"
        elif b.tokens is not None and c.input_tokens + c.output_tokens >= b.tokens:
            reason = "budget_tokens"
        elif b.cost is not None and c.cost >= b.cost:
            reason = "budget_cost"
        elif b.wall_s is not None and time.monotonic() - self._started >= self._last_call_s():
            reason = "budget_wall_time"
        if reason:
            with self._lock:
                self.stop_reason = self.stop_reason or reason
            self.on_event("stop", {"reason": self.stop_reason})
        return self.stop_reason

    def _claim_candidate(self) -> bool:
        with self._lock:
            if self.stopped():
                return False
            self.count.candidates += 1
            return True

    # proposer calls ---------------------------------------------------------------------------------
    def ask(self, key: str, request: Request) -> tuple[int | None, Answer]:
        """One proposer call, journaled under `key` (a stored call is replayed, not asked again)."""
        stored = self.store.call(self.run_id, key)
        if stored:
            self._count_call(stored.input_tokens, stored.output_tokens, stored.cost, stored.error, True)
            return stored.id, Answer(stored.messages, stored.response,
                                     Usage(stored.input_tokens, stored.output_tokens, stored.cost),
                                     stored.error, stored.attempts, stored.seconds, stored.finish,
                                     stored.output_limit)
        with self._lock:
            hopeless = self.fatal or self.failing
        if hopeless:  # queued behind calls that showed the proposer cannot answer: not asked, not stored
            return None, Answer([], None, error=hopeless)
        started = time.time()
        try:
            answer = self.proposer.ask(request)
        except FatalProposerError as exc:  # not stored: a resumed run asks again once the cause is mended
            with self._lock:
                first, self.fatal = self.fatal is None, self.fatal or str(exc)
            if first:
                self.on_event("error", {"message": str(exc)})
            return None, Answer([], None, error=str(exc))
        t0 = time.monotonic()
        call_id = self.store.add_call(self.run_id, key, request.kind, self.proposer.name, answer.messages,
                                      answer.text, answer.error, answer.usage.input_tokens,
                                      answer.usage.output_tokens, answer.usage.cost, answer.attempts, started,
                                      answer.seconds, answer.finish, answer.output_limit)
        self._count_call(answer.usage.input_tokens, answer.usage.output_tokens, answer.usage.cost, answer.error, False)
        self._overhead(t0)
        self.on_event("call", {"key": key, "kind": request.kind, "error": answer.error,
                               "tokens": answer.usage.input_tokens + answer.usage.output_tokens})
        return call_id, answer

    def _count_call(self, tin, tout, cost, error, replayed) -> None:
        """Count a call. `config.stop_after_failures` live calls failing in a row, with no answer between
        them, stop the run (`proposer_failing`): the endpoint is down, and its rounds would all be spent
        failing. Replayed failures do not count: a resumed run asks the endpoint again."""
        with self._lock:
            c = self.count
            c.calls += 1
            c.replayed_calls += replayed
            c.failed_calls += bool(error)
            c.last_error = error or c.last_error
            if not replayed:
                self._failed_in_a_row = self._failed_in_a_row + 1 if error else 0
                if error and self._failed_in_a_row >= self.config.stop_after_failures:
                    self.failing = self.failing or error
            c.input_tokens += tin
            c.output_tokens += tout
            if cost is None:
                c.unpriced_calls += not error
            else:
                c.cost += cost

    def ideas(self, key: str, round_: int, parents: list[Cand], count: int) -> list[tuple[int, Idea]] | None:
        """Ask for `count` ideas building on `parents`; returns (idea id, idea) pairs, maybe none, or
        None when the proposer says it has no idea left (the run is then complete)."""
        if self.stopped():
            return []
        request = Request("ideas", self.problem, self.config.backend, self.kernels(parents), count=count,
                          tried=self.tried(parents), failures=self.failures(round_ - 1), target=self.target())
        call_id, answer = self.ask(key, request)
        if answer.text is None:
            return []
        t0 = time.monotonic()
        ideas, error = parse_ideas(answer.text, count)
        if error == "exhausted":
            self._overhead(t0)
            return None
        if error:
            with self._lock:
                self.count.malformed += 1
        parent = parents[0].id if parents else None
        out = [(self.store.add_idea(self.run_id, f"{key}/{j:02d}", round_, call_id, parent, idea.text, idea.category), idea)
               for j, idea in enumerate(ideas)]
        self._overhead(t0)
        return out

    # what a proposer is told ------------------------------------------------------------------------
    def target(self) -> Target | None:
        """The sizes timed, the baselines and the roofline floor: measured once per run and stored."""
        with self._target_lock:
            if not self._target_done:
                self._target_done = True
                self._target = run_target(self.store, self.run_id, self.problem, self.verifier, self.on_event)
            return self._target

    def kernels(self, cands: list[Cand]) -> list[Kernel]:
        """Candidates as a proposer is shown them, their speedups all against the run's one baseline."""
        target = self.target()
        eager_ms = target.eager.cost_ms if target and target.eager else None
        return [c.kernel(eager_ms) for c in cands]

    def tried(self, kept: list[Cand]) -> list[TriedIdea]:
        """Every idea this run has tried and what it led to; `kept`: the kernels the next round builds on."""
        return tried_ideas(self._snapshot(), kept, self.kernels)

    def failures(self, round_: int) -> list[str]:
        """The failed kernels of `round_`, a line each: what the next round's requests are warned of."""
        return round_failures(self._snapshot(), round_)

    def _snapshot(self) -> list[Cand]:
        with self._lock:
            return list(self.cands.values())

    # candidates -------------------------------------------------------------------------------------
    def implement(self, key: str, round_: int, parent: Cand | None = None, idea: tuple[int, Idea] | None = None,
                  context: list[Cand] = (), history: list[Turn] = (), inspirations: list[Cand] = (),
                  ask_idea: bool = False) -> Future:
        """Ask for one kernel and verify it; the future holds the Cand (or None if the budget said no).

        `parent` is the kernel to improve (None: the reference); `context` more kernels to show;
        `history` the earlier turns of a multi-turn conversation (then it is a `fix` request).
        """
        if key in self.cands:  # already done in this session (a strategy asking twice)
            return _done(self.cands[key])
        if self.store.candidate(self.run_id, key):  # replayed: it counts against the budget as it did
            with self._lock:
                self.count.candidates += 1
        elif not self._claim_candidate():
            return _done(None)
        out: Future = Future()
        self._track(out)

        def work():
            try:
                # the kernels shown stay fastest first; the task names the one to build on by its place
                parents = list(context) if parent in context else ([parent] if parent else []) + list(context)
                request = Request("fix" if history else "implement", self.problem, self.config.backend,
                                  self.kernels(parents), base=parents.index(parent) if parent else 0,
                                  idea=idea[1] if idea else None, history=list(history),
                                  inspirations=self.kernels(list(inspirations)), ask_idea=ask_idea,
                                  failures=self.failures(round_ - 1), target=self.target())
                call_id, answer = self.ask(key, request)
                if answer.text is None and call_id is None:  # fatal: nothing stored, nothing to show
                    with self._lock:
                        self.count.candidates -= 1
                    out.set_result(None)
                    return
                cand = self._record(key, round_, call_id, answer, parent, idea)
                self._evaluate(cand, out)
            except BaseException as exc:  # noqa: BLE001 - surfaced through the future
                out.set_exception(exc)

        self._pool.submit(work)
        return out

    def _record(self, key, round_, call_id, answer: Answer, parent: Cand | None, idea) -> Cand:
        t0 = time.monotonic()
        if answer.text is None:
            parsed_source, error, stated = "", f"{NO_ANSWER} ({answer.error})", None
        else:
            parsed = parse_kernel(answer.text)
            parsed_source, error, stated = parsed.source or "", parsed.error, parsed.idea
            if answer.cut_off and error:  # cut off before its kernel ended: say so, not how the text broke
                error = OUTPUT_LIMIT
        backend = self.config.backend
        if parsed_source:
            try:
                backend = Candidate(parsed_source, f"{self.run_id}:{key}").backend
            except ValueError:  # an unknown backend: the verifier will say so on evaluation
                pass
        idea_id, idea_obj = (idea if idea else (None, None))
        if stated and not idea:  # the answer named its own idea (evolve): keep it as an idea record
            idea_obj = stated
            idea_id = self.store.add_idea(self.run_id, key, round_, call_id, parent.id if parent else None,
                                          stated.text, stated.category)
        cid = self.store.add_candidate(self.run_id, key, round_, call_id, idea_id, parent.id if parent else None,
                                       "malformed" if error else "proposer", backend, parsed_source, error)
        cand = Cand(cid, key, round_, parsed_source, backend, parent, idea_obj, idea_id, answer.text, error,
                    output_limit=answer.output_limit if answer.cut_off else None)
        with self._lock:
            self.cands[key] = cand
            self.count.malformed += bool(error and answer.text is not None)
        self._overhead(t0)
        return cand

    def seed(self, key: str, source: str) -> Future:
        """A starting kernel the user gave: stored and verified like any candidate (round 0)."""
        if key in self.cands:
            return _done(self.cands[key])
        backend = Candidate(source, key).backend
        cid = self.store.add_candidate(self.run_id, key, 0, None, None, None, "seed", backend, source)
        cand = Cand(cid, key, 0, source, backend)
        with self._lock:
            self.cands[key] = cand
        out: Future = Future()
        self._track(out)
        self._evaluate(cand, out)
        return out

    def _evaluate(self, cand: Cand, out: Future) -> None:
        stored = self.store.result(cand.id)
        if stored:
            cand.result = stored
            with self._lock:
                self.count.replayed_results += 1
                if cand.source and not stored.duplicate:
                    self._by_source.setdefault(cand.source, _done(cand.result))
            self._finish(cand, out)
            return
        if cand.parse_error:  # nothing to run: the answer had no usable kernel
            self._finish(cand, out)
            return
        if self.stopped() and self.stop_reason == "budget_wall_time":
            self._finish(cand, out)
            return
        with self._lock:
            evaluation = self._by_source.get(cand.source)
            duplicate = evaluation is not None
            if duplicate:
                self.count.duplicates += 1
            else:
                job = Job(self.problem, Candidate(cand.source, f"{self.run_id}:{cand.key}", cand.backend,
                                                  wait_until=self._wall_end()))
                evaluation = self._by_source[cand.source] = self.verifier.submit(job)

        def done(fut: Future) -> None:
            if fut.cancelled():  # withdrawn at the deadline: no verdict, the candidate stays unevaluated
                self._finish(cand, out)
                return
            try:
                result = fut.result()
                if INTERRUPTED in result.reasons:  # the verifier stopped mid-verdict: none stored, judged on resume
                    self._finish(cand, out)
                    return
                if duplicate:  # the same source was evaluated for an earlier candidate: its verdict
                    result = replace(result, duplicate=True)
                t0 = time.monotonic()
                self.store.add_result(cand.id, result)
                cand.result = result
                with self._lock:
                    self.count.evaluated += not duplicate
                if not duplicate and result.wall_seconds and self.config.budget.wall_s is not None:
                    with self._lock:  # less the baselines' measure, which a problem's first verdict alone makes
                        self._verdict_s.append(result.wall_seconds - result.phases.get("time.baselines", 0.0))
                    self._arm_deadline()
                self._overhead(t0)
                self._finish(cand, out)
            except BaseException as exc:  # noqa: BLE001
                out.set_exception(exc)

        evaluation.add_done_callback(done)

    def _finish(self, cand: Cand, out: Future) -> None:
        status = str(cand.result.status) if cand.result else unevaluated_status(cand.parse_error)
        with self._lock:
            self.count.by_status[status] = self.count.by_status.get(status, 0) + 1
        best = self.best(1)
        self.on_event("candidate", {"key": cand.key, "round": cand.round, "status": status,
                                    "speedup": cand.result.speedup_eager if cand.result else None,
                                    "best_speedup": best[0].result.speedup_eager if best else None})
        out.set_result(cand)

    def profile(self, cands: list[Cand]) -> None:
        """--profile: Nsight Compute's counters for a round's best kernels (search/profiling.py)."""
        if self.config.profile:
            self.profiler.profile(cands)

    # selection and waiting --------------------------------------------------------------------------
    def best(self, n: int) -> list[Cand]:
        """The `n` fastest correct candidates so far: in (round, key) order, a candidate displaces an
        earlier one only when faster beyond their spread (ranking.py); never arrival order. A kernel
        proposed again (the same source) holds one place, under its first candidate."""
        with self._lock:
            ok = sorted((c for c in self.cands.values() if c.correct and not c.duplicate),
                        key=lambda c: (c.round, c.key))
        return ranked(ok, lambda c: c.spread, n)

    def wait(self, futures: list[Future]) -> list[Cand]:
        return [c for c in (f.result() for f in futures) if c is not None]

    def finish(self, reason: str) -> None:
        """End the run early for a reason of the strategy's own (e.g. proposer_exhausted)."""
        with self._lock:
            self.stop_reason = self.stop_reason or reason
        self.on_event("stop", {"reason": self.stop_reason})

    def start_round(self, round_: int) -> None:
        self.round = round_
        self.on_event("round", {"round": round_})

    def _track(self, fut: Future) -> None:
        with self._lock:
            self._inflight.add(fut)
        fut.add_done_callback(lambda f: self._untrack(f))

    def _untrack(self, fut: Future) -> None:
        with self._lock:
            self._inflight.discard(fut)

    def drain(self) -> None:
        """Wait for everything in flight (a strategy that returns early leaves nothing running)."""
        while True:
            with self._lock:
                pending = list(self._inflight)
            if not pending:
                return
            for f in pending:
                try:
                    f.result()
                except Exception:  # noqa: BLE001 - reported by whoever holds the future
                    pass

    def _overhead(self, t0: float) -> None:
        with self._lock:
            self.count.overhead_s += time.monotonic() - t0

    def gpu_idle_fraction(self) -> float:
        wall = (time.monotonic() - self._session) * len(self.verifier.devices)  # this session's, as busy is
        busy = self.verifier.busy_seconds() - self._busy0
        return max(0.0, 1.0 - busy / wall) if wall > 0 else 0.0

    def device_usage(self) -> list[dict]:
        """Per device of the verifier: what it judged and how busy it was (since the verifier started)."""
        return self.verifier.usage()

    def wall_seconds(self) -> float:
        return time.monotonic() - self._started
