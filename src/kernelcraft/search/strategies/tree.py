"""The default: each round, K ideas in plain words from the best kernels and their feedback; M
implementations of each idea, all verified in parallel; the top B kernels seed the next round."""

from __future__ import annotations

from kernelcraft.search.strategies.seeds import verify_seeds


def run(engine) -> None:
    cfg = engine.config
    verify_seeds(engine)
    for r in range(1, cfg.rounds + 1):
        if engine.stopped():
            return
        engine.start_round(r)
        best = engine.best(cfg.beam)
        ideas = engine.ideas(f"r{r:02d}/ideas", r, best, cfg.ideas)
        if ideas is None:  # the proposer has tried everything it knows
            engine.finish("proposer_exhausted")
            return
        futures = []
        if ideas:
            for i, idea in enumerate(ideas):
                parent = best[i % len(best)] if best else None  # in turn over the beam, as the ideas prompt says
                for m in range(cfg.impls):
                    futures.append(engine.implement(f"r{r:02d}/i{i:02d}/m{m:02d}", r, parent, idea, context=best))
        else:  # no usable ideas: ask for plain improvements rather than waste the round
            for m in range(cfg.ideas * cfg.impls):
                futures.append(engine.implement(f"r{r:02d}/any/m{m:02d}", r, best[0] if best else None, context=best))
        engine.wait(futures)
        engine.profile(engine.best(cfg.beam))  # --profile: counters for the kernels the next round builds on
