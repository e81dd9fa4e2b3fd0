"""Multi-turn refinement: `samples` independent conversations, each turn answered by the verifier's
feedback (compiler errors, correctness diffs, timings, the kernel breakdown). Turn t is round t."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from kernelcraft.propose.base import Turn
from kernelcraft.search.strategies.seeds import verify_seeds


def run(engine) -> None:
    verify_seeds(engine)
    start = (engine.best(1) or [None])[0]
    cfg = engine.config

    def chain(c: int) -> None:
        history: list[Turn] = []
        for t in range(1, cfg.rounds + 1):
            if engine.stopped():
                return
            engine.start_round(t)
            cand = engine.implement(f"c{c:02d}/t{t:02d}", t, parent=start, history=history).result()
            if cand is None:
                return
            if cand.answer is None:  # the call failed: no turn to answer, the next asks the same again
                continue
            engine.profile([cand])  # --profile: the turn's kernel, if correct, answered with its counters too
            history.append(Turn(cand.answer, cand.feedback, unusable=cand.parse_error is not None))

    with ThreadPoolExecutor(cfg.samples, thread_name_prefix="refine") as pool:
        list(pool.map(chain, range(cfg.samples)))
