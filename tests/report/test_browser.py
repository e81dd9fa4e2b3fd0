"""The HTML report in a real browser: headless Chromium renders it (no network), the screenshot is not
blank, and the rendered page carries the key numbers.

Skipped only when no Chromium binary exists; with KERNELCRAFT_REQUIRE_CHROMIUM=1 (CI sets it) a missing
browser is a failure instead."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest
from matplotlib.image import imread

from kernelcraft.report import data, html
from kernelcraft.report.page import render

pytestmark = pytest.mark.slow
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@pytest.fixture(scope="module")
def chromium() -> str:
    found = next((path for path in map(shutil.which, BROWSERS) if path), None)
    if found is None:
        if os.environ.get("KERNELCRAFT_REQUIRE_CHROMIUM") == "1":
            pytest.fail(f"KERNELCRAFT_REQUIRE_CHROMIUM=1 but none of {', '.join(BROWSERS)} is on PATH")
        pytest.skip(f"no Chromium binary ({', '.join(BROWSERS)}) on PATH to render the HTML report")
    return found


def browse(chromium: str, tmp_path, page, *flags: str) -> str:
    """Run headless Chromium on a local file with networking cut off; its stdout."""
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
                           "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",  # nothing can be fetched
                           "--window-size=1280,2000", *flags, page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_the_run_report_renders_in_chromium(chromium, runs, tmp_path):
    report = data.run_report(runs.store, runs.tree)
    page = tmp_path / "report.html"
    page.write_text(render(report, str(runs.store.path)), encoding="utf-8")

    shot = tmp_path / "shot.png"
    browse(chromium, tmp_path, page, f"--screenshot={shot}")
    pixels = imread(shot)[..., :3]
    assert pixels.shape[:2] == (2000, 1280)
    colours = np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    ink = (pixels < 0.9).any(axis=2).mean()  # share of pixels that are not (near) white
    assert len(colours) > 100 and ink > 0.03, (len(colours), ink)
    blue = ((pixels[..., 2] > 0.8) & (pixels[..., 0] < 0.3)).sum()  # the plots' and tags' blue is drawn
    assert blue > 500

    dom = browse(chromium, tmp_path, page, "--dump-dom")
    best, first = report["improvements"][-1], report["improvements"][0]
    for words in (runs.tree, html.ms(best["runtime_ms"]), html.ms(first["runtime_ms"]), html.pct(best["pct_of_eager"]),
                  "Use blocks of 4096 elements", "CPU timings", "Speedup per round", "paid off"):
        assert words in dom, words
    assert "<script" not in dom.lower()
