"""The samples' report in a real browser (headless Chromium, every network request refused): no
JavaScript error, and every plot drawn with data."""

from __future__ import annotations

import os

import pytest

from amqpcap.report import build_report
from tools.report_browser import chromium, view


@pytest.fixture(scope="module")
def browser():
    if not chromium():
        # CI installs it (.ci/run); a developer's machine may not have it
        (pytest.fail if os.environ.get("CI") else pytest.skip)("no chromium on PATH (apt-get install -y chromium)")


@pytest.mark.slow
def test_the_report_renders_offline_without_errors(lake, browser, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(build_report(lake[0]), encoding="utf-8")
    seen = view(page, tmp_path / "report.png")
    assert seen.console_errors == [] and seen.page_errors == []
    assert seen.requests == []  # nothing fetched: Plotly is inlined
    divs = page.read_text().count('class="plotly-graph-div"')
    assert len(seen.plots) == divs >= 12
    for plot in seen.plots:
        assert plot["svg"] > 0, plot  # Plotly drew it
        assert plot["traces"] > 0 and plot["drawn"] == plot["traces"], plot  # every trace is in the SVG
        assert plot["points"] > 0, plot  # with data
        assert plot["width"] > 300 and plot["height"] > 150, plot
        assert plot["overflow"] <= 1, plot  # not clipped by its container
    assert {s["id"] for s in seen.sections if not s["empty"] and s["plots"]} == {
        "attention", "acks", "confirms", "rpc", "rates", "errors", "timeline", "heartbeats", "flow", "talkers", "decode"}
    assert (tmp_path / "report.png").stat().st_size > 20_000
