"""metrics.py: fast_p, the geometric mean, and a benchmark's summary, on hand-computed examples."""

from __future__ import annotations

import math

import pytest

from kernelcraft.metrics import P_VALUES, bench_metrics, fast_p, geomean


def test_fast_p_counts_none_as_incorrect():
    speedups = [2.5, None, 0.8, 1.2, None]
    assert fast_p(speedups, 0.0) == pytest.approx(3 / 5)  # every correct kernel, over every problem
    assert fast_p(speedups, 1.0) == pytest.approx(2 / 5)
    assert fast_p(speedups, 2.0) == pytest.approx(1 / 5)
    assert fast_p(speedups, 3.0) == 0.0


def test_fast_p_is_strictly_greater():
    assert fast_p([1.0], 1.0) == 0.0  # as fast as the baseline is not faster
    assert fast_p([1.0000001], 1.0) == 1.0
    assert fast_p([1.5, 1.5, 1.6], 1.5) == pytest.approx(1 / 3)
    assert fast_p([0.0], 0.0) == 0.0


def test_fast_p_of_nothing():
    assert fast_p([], 1.0) == 0.0
    assert fast_p([None, None], 0.0) == 0.0


def test_geomean():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([1.0, 10.0, 100.0]) == pytest.approx(10.0)
    assert geomean([3.0]) == pytest.approx(3.0)


def test_geomean_ignores_none_and_non_positive():
    assert geomean([2.0, None, 8.0, 0.0, -4.0]) == pytest.approx(4.0)
    assert geomean([]) is None
    assert geomean([None, 0.0, -1.0]) is None


def test_bench_metrics_hand_computed():
    rows = [
        {"problem": "a", "correct": True, "speedup_eager": 4.0, "speedup_compile": 2.0},
        {"problem": "b", "correct": True, "speedup_eager": 1.0, "speedup_compile": 0.5},
        {"problem": "c", "correct": False, "speedup_eager": 9.0, "speedup_compile": 9.0},  # not counted
        {"problem": "d", "correct": True, "speedup_eager": 1.6, "speedup_compile": None},  # no compile baseline
        {"problem": "e"},  # never evaluated
    ]
    m = bench_metrics(rows)
    assert set(m) == {"problems", "correct", "fast_p_eager", "geomean_eager", "fast_p_compile", "geomean_compile"}
    assert m["problems"] == 5 and m["correct"] == 3
    assert list(m["fast_p_eager"]) == ["0", "1", "1.5", "2"] == [f"{p:g}" for p in P_VALUES]
    assert m["fast_p_eager"] == pytest.approx({"0": 3 / 5, "1": 2 / 5, "1.5": 2 / 5, "2": 1 / 5})
    assert m["fast_p_compile"] == pytest.approx({"0": 2 / 5, "1": 1 / 5, "1.5": 1 / 5, "2": 0.0})
    assert m["geomean_eager"] == pytest.approx((4.0 * 1.0 * 1.6) ** (1 / 3))
    assert m["geomean_compile"] == pytest.approx(1.0)  # sqrt(2.0 * 0.5); the incorrect 9.0 is left out
    assert math.isclose(m["geomean_eager"], 1.8566, rel_tol=1e-4)


def test_bench_metrics_of_no_problems():
    m = bench_metrics([])
    assert m["problems"] == 0 and m["correct"] == 0
    assert m["fast_p_eager"] == {"0": 0.0, "1": 0.0, "1.5": 0.0, "2": 0.0}
    assert m["geomean_eager"] is None and m["geomean_compile"] is None


def test_bench_metrics_none_correct():
    m = bench_metrics([{"correct": False, "speedup_eager": 5.0, "speedup_compile": 5.0}] * 3)
    assert m["correct"] == 0 and m["fast_p_eager"]["0"] == 0.0 and m["geomean_eager"] is None
