"""--profile in a run: Nsight Compute's counters for a round's best kernels, once per candidate (from the
store when profiled before, else measured now and stored). The summary joins each kernel's feedback
(Cand.profile). A machine that cannot profile (no ncu, no GPU, counters not permitted) is told once and
asked no more; a fault of the profiler is recorded on the candidate and never ends the run."""

from __future__ import annotations

import threading
from typing import Callable

from kernelcraft.candidate import Candidate
from kernelcraft.problems import Problem
from kernelcraft.search.records import Cand
from kernelcraft.store import Store
from kernelcraft.verify import JobFront

PROFILE_MAX = 4  # kernels profiled per call


class RunProfiler:
    def __init__(self, store: Store, run_id: str, problem: Problem, verifier: JobFront,
                 on_event: Callable[[str, dict], None]):
        self.store, self.run_id, self.problem, self.verifier, self.on_event = store, run_id, problem, verifier, on_event
        self._lock = threading.Lock()  # one profile at a time (refine's chains call in parallel)
        self.off: str | None = None  # why this machine cannot profile, once it said so

    def profile(self, cands: list[Cand]) -> None:
        """Counters for the correct ones among `cands` (at most PROFILE_MAX)."""
        from kernelcraft.verify.profile import ENVIRONMENT, ProfileError

        with self._lock:
            for cand in [c for c in cands if c.correct][:PROFILE_MAX]:
                if cand.profile is not None:
                    continue
                stored = self.store.profile(cand.id)
                if stored is None and self.off is None:
                    try:
                        job = Candidate(cand.source, f"{self.run_id}:{cand.key}", cand.backend)
                        stored = self.verifier.profile(self.problem, job).to_dict()
                    except ProfileError as exc:
                        if exc.reason in ENVIRONMENT:  # not the kernel's doing: nothing stored, a resume may profile
                            self.off = str(exc)
                            self.on_event("profile_off", {"reason": exc.reason, "message": str(exc)})
                            continue
                        stored = {"error": str(exc), "reason": exc.reason}
                    except Exception as exc:  # noqa: BLE001 - a fault of the profiler must not end the run
                        stored = {"error": f"{type(exc).__name__}: {exc}", "reason": "profiler_fault"}
                    self.store.add_profile(cand.id, stored)
                    self.on_event("profile", {"key": cand.key, "error": stored.get("error")})
                if stored is not None and "error" not in stored:
                    cand.profile = stored
