"""report/plots.py: every plot is a well-formed inline SVG carrying the figures it was given; plots with
nothing to draw say so by returning None."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from kernelcraft.report import data, plots

pytestmark = pytest.mark.slow
SVG = "{http://www.w3.org/2000/svg}"


def texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)  # well-formed XML, or this raises
    assert root.tag == f"{SVG}svg" and "width" not in root.attrib and root.attrib.get("viewBox")
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


@pytest.fixture(scope="module")
def tree(runs):
    return data.run_report(runs.store, runs.tree)


@pytest.fixture(scope="module")
def benches(runs):
    return data.bench_report(runs.store, runs.bench_a), data.bench_report(runs.store, runs.bench_b)


def test_speedup_by_round_draws_every_candidate_and_the_best_so_far(tree):
    svg = plots.speedup_by_round([("run", tree)])
    words = texts(svg)
    assert "Speedup per round" in words and "PyTorch eager" in words and "round" in words
    assert {"run: correct candidates", "run: not correct", "run: best so far"} <= set(words)
    assert "1" in words and "2" in words  # one tick per round
    both = texts(plots.speedup_by_round([("A", tree), ("B", tree)]))
    assert "A: best so far" in both and "B: best so far" in both


def test_categories_chart_shows_paid_off_over_proposed(tree):
    words = texts(plots.categories_chart([("run", tree)]))
    assert {"parallelism", "precision", "memory", "control"} <= set(words)
    assert words.count("1/1") == 1 and words.count("0/2") == 2 and words.count("0/1") == 1
    assert plots.categories_chart([("run", dict(tree, categories=[]))]) is None


def test_fast_p_chart_for_benches_only(tree, benches):
    assert plots.fast_p_chart([("run", tree)]) is None  # a single run has no fast_p curve
    words = texts(plots.fast_p_chart([("A", benches[0]), ("B", benches[1])]))
    assert "fast_p over p" in words and "A: vs PyTorch eager" in words and "B: vs PyTorch eager" in words
    assert not any("torch.compile" in w for w in words)  # not timed in these benches: no curve against it


def test_roofline_chart_needs_a_floor(tree):
    assert plots.roofline_chart([("run", tree)]) is None  # CPU results carry no roofline
    rows = [dict(tree["problems"][0], problem="level1/softmax", runtime_ms=0.8, roofline_ms=0.2),
            dict(tree["problems"][0], problem="level1/relu", runtime_ms=0.05, roofline_ms=0.04)]
    words = texts(plots.roofline_chart([("run", dict(tree, problems=rows))]))
    assert "level1/softmax" in words and "0.8 ms · 25% of the floor" in words and "0.05 ms · 80% of the floor" in words
