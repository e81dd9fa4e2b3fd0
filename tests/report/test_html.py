"""report/html.py: one self-contained page (no scripts, nothing fetched) with the report's numbers, the
best kernel highlighted, a drill-down per candidate, and everything from the store escaped."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from kernelcraft.report import data, html
from kernelcraft.report.page import render
from tests.report.conftest import INJECTION

pytestmark = pytest.mark.slow


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.attrs, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [(tag, k, v or "") for k, v in attrs]

    def handle_data(self, d):
        self.text.append(d)


def parse(page: str) -> Tags:
    p = Tags()
    p.feed(page)
    return p


def assert_self_contained(page: str) -> None:
    p = parse(page)
    assert "script" not in p.tags and "link" not in p.tags and "iframe" not in p.tags and "img" not in p.tags
    fetched = [(t, k, v) for t, k, v in p.attrs if k in ("src", "href") and not v.startswith("#")]
    assert fetched == []
    assert "@import" not in page and not re.search(r"url\((?!#)", page)  # an SVG's url(#id) stays in the page
    assert not any(k.startswith("on") for _, k, _ in p.attrs)  # no event handlers either


@pytest.fixture(scope="module")
def tree(runs):
    return data.run_report(runs.store, runs.tree)


def test_run_page_has_the_numbers_plots_source_and_drill_down(tree):
    page = render(tree, "runs.db")
    assert_self_contained(page)
    text = " ".join(parse(page).text)
    best, first = tree["improvements"][-1], tree["improvements"][0]
    assert html.ms(best["runtime_ms"]) in text and html.ms(first["runtime_ms"]) in text
    assert html.pct(best["pct_of_eager"]) in text and html.pct(first["pct_of_eager"]) in text
    assert "Use blocks of 4096 elements" in text and "parallelism" in text
    assert "CPU timings" in text and "not how fast they would be on a GPU" in text
    assert page.count('<svg') == 2 and "No roofline floor" in text  # speedup and categories; no floor on a CPU
    assert "paid off when at least one candidate" in text
    assert page.count('<details class="cand"') == 6 and "no_code_block" in text and "incorrect" in text
    assert '<span style="color: #007020; font-weight: bold">class</span>' in page  # Pygments, inline styles
    source = page[page.index('<div class="source">'):]
    assert "relu_kernel" in source[:source.index("</div>")] and "4096" in source[:source.index("</div>")]


def test_everything_from_the_store_is_escaped(runs):
    report = data.run_report(runs.store, runs.sample)
    assert INJECTION in report["best"]["source"]  # the injected comment is in the stored kernel
    page = render(report, "runs.db")
    assert_self_contained(page)
    assert INJECTION not in page and not re.search(r"<\s*/?\s*script", page, re.I)
    assert page.count("&lt;/script&gt;&lt;script&gt;") >= 2  # highlighted best source, and the drill-down's
    assert "Vectorize &lt;b&gt;loads&lt;/b&gt;" in page and "<b>loads" not in page
    assert INJECTION in " ".join(parse(page).text)  # shown as text, as written


def test_bench_and_comparison_pages(runs, tree):
    bench = data.bench_report(runs.store, runs.bench_a)
    page = render(bench, "runs.db")
    assert_self_contained(page)
    text = " ".join(parse(page).text)
    assert "fast_p over p" in page and "50.0%" in text and "level1/sigmoid" in text
    assert "torch.compile was not timed" in text
    assert page.count('<details class="run"') == 2

    sample = data.run_report(runs.store, runs.sample)
    both = render(data.compare(tree, sample), "runs.db")
    assert_self_contained(both)
    text = " ".join(parse(both).text)
    assert tree["run"]["run_id"] in text and sample["run"]["run_id"] in text
    assert html.ms(tree["best"]["runtime_ms"]) in text and html.ms(sample["best"]["runtime_ms"]) in text
    assert "A: best so far" in both and "B: best so far" in both
    assert INJECTION not in both

    benches = render(data.compare(bench, data.bench_report(runs.store, runs.bench_b)), "runs.db")
    assert_self_contained(benches)
    assert "A: vs PyTorch eager" in benches and "B: vs PyTorch eager" in benches
