"""'Faster' means beyond the measured spread: the rule, and rankings built on it."""

from __future__ import annotations

from kernelcraft.ranking import champion, clearly_faster, ranked
from kernelcraft.result import Result, Timing, faster_beyond_spread


def timing(median: float, iqr: float) -> Timing:
    return Timing(median_ms=median, iqr_ms=iqr, cv=0.0, samples=50, min_ms=median - iqr, method="cpu_perf_counter")


def test_faster_only_when_the_medians_differ_by_more_than_half_the_summed_iqrs():
    assert not timing(0.95, 0.1).faster_than(timing(1.0, 0.1))  # 0.05 apart, band 0.1: noise
    assert timing(0.85, 0.1).faster_than(timing(1.0, 0.1))  # 0.15 apart: faster
    assert not timing(1.0, 0.1).faster_than(timing(0.85, 0.1))
    assert not timing(1.0, 0.0).faster_than(timing(1.0, 0.0))  # equal is not faster
    assert faster_beyond_spread(0.99, None, 1.0, None)  # no IQR recorded: the medians decide


def test_the_champion_keeps_the_earlier_candidate_inside_the_spread():
    items = [("a", (1.00, 0.1)), ("b", (0.95, 0.1)), ("c", (0.97, 0.02))]
    assert champion(items, lambda i: i[1])[0] == "a"  # the old rule (smallest median) picked b
    items.append(("d", (0.80, 0.02)))
    assert champion(items, lambda i: i[1])[0] == "d"
    assert champion([("x", None)], lambda i: i[1]) is None


def test_ranked_is_a_succession_of_champions_and_skips_the_untimed():
    items = [("a", (1.00, 0.1)), ("u", None), ("b", (0.5, 0.01)), ("c", (0.95, 0.1))]
    assert [i[0] for i in ranked(items, lambda i: i[1])] == ["b", "a", "c"]
    assert [i[0] for i in ranked(items, lambda i: i[1], 1)] == ["b"]


def test_clearly_faster_and_the_spreads_of_a_stored_result():
    stored = Result.from_dict({"problem": "p", "candidate": "c", "backend": "triton", "status": "ok", "correct": True,
                               "runtime": timing(2.0, 0.4).to_dict(), "eager": timing(2.3, 0.4).to_dict()})
    assert stored.spread() == (2.0, 0.4) and stored.spread("compiled") is None
    assert not clearly_faster(stored.spread(), stored.spread("eager"))
    assert clearly_faster((1.0, 0.0), None) and not clearly_faster(None, (1.0, 0.0))
