"""The HTML report: one self-contained page (inline CSS, plots as inline SVG, no scripts, nothing fetched) for a
run, a bench or two of either side by side (html.py's pages), or an apply (apply_html.py)."""

from __future__ import annotations

import time
from html import escape
from importlib import resources
from string import Template

from kernelcraft.report.apply_html import apply_page
from kernelcraft.report.html import _bench_page, _compare_page, _ident, _run_page


def render(report: dict, store_path: str = "") -> str:
    """The page for a report dict from report/data.py (a run, a bench, or a comparison)."""
    from kernelcraft import __version__

    kind = report["kind"]
    if kind == "run":
        title, body = f"kernelcraft report · run {report['run']['run_id']}", _run_page(report)
    elif kind == "bench":
        title, body = f"kernelcraft report · bench {report['bench']['bench_id']}", _bench_page(report)
    elif kind == "apply":
        title, body = f"kernelcraft report · apply {report['apply']['apply_id']}", apply_page(report)
    else:
        a, b = report["a"], report["b"]
        title = f"kernelcraft report · {_ident(a)} vs {_ident(b)}"
        body = _compare_page(report)
    page = Template(resources.files("kernelcraft.report").joinpath("templates/report.html").read_text())
    return page.substitute(title=escape(title), body=body, version=escape(__version__), store=escape(str(store_path)),
                           made=time.strftime("%Y-%m-%d %H:%M"))
