"""The search's best kernel: a later candidate displaces an earlier one only when faster beyond the spread."""

from __future__ import annotations

from kernelcraft.result import Result, Status, Timing
from kernelcraft.search.engine import Engine
from kernelcraft.search.records import Cand
from kernelcraft.search.strategies.evolve import admit
from kernelcraft.spec import RunConfig


class _Verifier:
    devices = ["cpu"]

    def busy_seconds(self) -> float:
        return 0.0


def cand(key: str, round_: int, median: float | None, iqr: float = 0.0) -> Cand:
    runtime = Timing(median, iqr, 0.0, 40, median, "cpu_perf_counter") if median is not None else None
    result = Result("p", key, "triton", Status.OK if median is not None else Status.INCORRECT, median is not None,
                    runtime=runtime)
    return Cand(0, key, round_, "src", "triton", result=result)


def engine_with(*cands: Cand) -> Engine:
    engine = Engine(None, "run", None, None, _Verifier(), RunConfig(concurrency=1))
    engine.cands = {c.key: c for c in cands}
    return engine


def test_a_later_candidate_within_the_spread_does_not_displace_the_best():
    # medians 1.00 and 0.95 with IQRs of 0.1: the difference is noise, the earlier key stays best
    engine = engine_with(cand("r01/i00/m00", 1, 1.00, 0.1), cand("r01/i01/m00", 1, 0.95, 0.1))
    try:
        assert [c.key for c in engine.best(2)] == ["r01/i00/m00", "r01/i01/m00"]
    finally:
        engine.close()


def test_a_clearly_faster_candidate_wins_and_round_order_comes_before_key_order():
    engine = engine_with(cand("seed/00", 0, 1.00, 0.01), cand("r01/i00/m00", 1, 1.0, 0.01),
                         cand("r02/i00/m00", 2, 0.5, 0.01), cand("r01/i01/m00", 1, None))
    try:
        assert [c.key for c in engine.best(3)] == ["r02/i00/m00", "seed/00", "r01/i00/m00"]
    finally:
        engine.close()


def test_evolve_keeps_a_cells_incumbent_unless_clearly_faster():
    archive: dict = {}
    first, noise = cand("g001/c000", 1, 1.0, 0.1), cand("g001/c001", 1, 0.96, 0.1)  # one cell: no speedups
    for c in (first, noise):
        admit(archive, c)
    assert list(archive.values()) == [first]
    admit(archive, cand("g002/c001", 2, 0.7, 0.01))
    assert list(archive.values())[0].key == "g002/c001"


def test_a_speedup_the_verifier_could_not_confirm_is_never_the_best_or_a_parent():
    unconfirmed = cand("r01/i01/m00", 1, 0.01, 0.0)
    unconfirmed.result.review_resolved = False  # 100x past the sanity bound, no timed call checked
    confirmed = cand("r01/i02/m00", 1, 0.02, 0.0)
    confirmed.result.review_resolved = True  # as fast, and it held on timed calls with changed inputs
    engine = engine_with(cand("r01/i00/m00", 1, 1.0, 0.01), unconfirmed, confirmed)
    try:
        assert [c.key for c in engine.best(3)] == ["r01/i02/m00", "r01/i00/m00"]
    finally:
        engine.close()
    archive: dict = {}
    admit(archive, unconfirmed)
    assert archive == {}
