"""Search strategies, by name. Each is a module with `run(engine)`, written in the engine's primitives."""

from __future__ import annotations

from kernelcraft.search.strategies import evolve, refine, sample, tree

STRATEGIES = {"tree": tree.run, "refine": refine.run, "sample": sample.run, "evolve": evolve.run}


def get_strategy(name: str):
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; choose from {', '.join(STRATEGIES)}") from None
