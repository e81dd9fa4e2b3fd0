"""An evolving archive: the best kernel per cell (idea category x speed band) is kept; each child
takes a parent drawn from the archive (faster ones likelier) and a few inspirations from other cells,
and names the idea it applied. With islands, each keeps its own archive and the overall best
migrates to every island each MIGRATE generations."""

from __future__ import annotations

import math
import random

from kernelcraft.ranking import clearly_faster, ranked
from kernelcraft.search.strategies.seeds import verify_seeds

MIGRATE = 2
INSPIRATIONS = 2


def cell(cand) -> tuple[str, int]:
    category = cand.idea.category if cand.idea else "seed"
    return category, int(math.floor(2 * math.log2(max(cand.result.speedup_eager or 1e-3, 1e-3))))


def admit(archive: dict, cand) -> None:
    if cand.spread is None:  # no time to rank by (or a speedup the verifier could not confirm)
        return
    key = cell(cand)
    if key not in archive or clearly_faster(cand.spread, archive[key].spread):  # within the spread: the incumbent stays
        archive[key] = cand


def run(engine) -> None:
    cfg = engine.config
    islands = [dict() for _ in range(cfg.islands)]
    for cand in verify_seeds(engine):
        if cand.correct:
            for archive in islands:
                admit(archive, cand)
    for g in range(1, cfg.rounds + 1):
        if engine.stopped():
            return
        engine.start_round(g)
        futures = []
        for j in range(cfg.samples):
            rng = random.Random(f"{cfg.seed}/{g}/{j}")  # a child's draws depend on its place, not on timing
            archive = islands[j % cfg.islands]
            elites = ranked(sorted(archive.values(), key=lambda c: (c.round, c.key)), lambda c: c.spread)
            parent, inspirations = None, []
            if elites:
                weights = [1.0 / (rank + 1) for rank in range(len(elites))]
                parent = rng.choices(elites, weights)[0]
                others = [c for c in elites if c is not parent]
                inspirations = rng.sample(others, min(INSPIRATIONS, len(others)))
            futures.append(engine.implement(f"g{g:03d}/c{j:03d}", g, parent, inspirations=inspirations,
                                            ask_idea=True))
        for j, future in enumerate(futures):
            child = future.result()
            if child is not None and child.correct:
                admit(islands[j % cfg.islands], child)
        engine.profile(engine.best(cfg.beam))  # --profile: counters for the archive's best, shown as parents
        if cfg.islands > 1 and g % MIGRATE == 0:
            best = engine.best(1)
            for archive in islands:
                for cand in best:
                    admit(archive, cand)
