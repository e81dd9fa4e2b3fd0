"""Best-of-N: N independent kernels for the reference (or the best seed), all verified in parallel."""

from __future__ import annotations

from kernelcraft.search.strategies.seeds import verify_seeds


def run(engine) -> None:
    verify_seeds(engine)
    engine.start_round(1)
    parent = (engine.best(1) or [None])[0]
    engine.wait([engine.implement(f"s/{i:03d}", 1, parent=parent) for i in range(engine.config.samples)])
    engine.profile(engine.best(engine.config.beam))  # --profile: counters of the best, for the report
