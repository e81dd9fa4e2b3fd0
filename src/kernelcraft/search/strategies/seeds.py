"""Round 0, shared by every strategy: the user's starting kernels, verified before anything is asked."""

from __future__ import annotations


def verify_seeds(engine) -> list:
    futures = [engine.seed(f"seed/{i:02d}", source) for i, source in enumerate(engine.config.seeds)]
    return engine.wait(futures)
