"""`amqpcap report`: one self-contained HTML page about the traffic in a lake (or part of it).

    from amqpcap.report import build_report
    html = build_report("lake", since="2026-11-21", until="2026-11-22")

Each section (amqpcap.report.sections) runs aggregating SQL over the lake's DuckDB views
(amqpcap.lake.duckdb_views) and turns the small results into Plotly figures and tables; page.py
lays them out with Plotly's JavaScript inlined.
"""

from __future__ import annotations

from amqpcap.report.period import Period, PeriodError
from amqpcap.report.source import Context, LakeError, open_lake, utc

__all__ = ["build_report", "render_views", "LakeError", "PeriodError", "Period"]


def build_report(lake: str, since: str | None = None, until: str | None = None) -> str:
    """The HTML page for the lake at `lake` (LakeError: none there; PeriodError: bad since/until)."""
    period = Period.parse(since, until)
    return render_views(open_lake(lake), period, lake)


def render_views(con, period: Period, lake: str) -> str:
    """The page from a DuckDB connection whose views are named like the tables."""
    from amqpcap.report.header import build_header
    from amqpcap.report.page import render
    from amqpcap.report.sections import SECTIONS
    ctx = Context.of(utc(con), period)
    return render(build_header(ctx, lake), [section.build(ctx) for section in SECTIONS])
