"""What the decoder could not read: issues and bytes skipped per capture (decode_issues, captures)."""

from __future__ import annotations

import posixpath

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from amqpcap.report.charts import colour, shorten
from amqpcap.report.model import NOTHING, Section, Table

SHOWN = 20


def build(ctx) -> Section:
    section = Section("decode", "Decode issues and bytes skipped",
                      "Per capture, the problems met while decoding (gaps in the TCP stream, resynchronisations, "
                      "malformed frames...) by kind: how many (left) and how many stream bytes could not be decoded "
                      "(right). Every byte is either in a frame or counted here.")
    issues = ctx.rows(f"""
        WITH per AS (SELECT capture, issue_kind, count(*) AS n, coalesce(sum(bytes_skipped), 0) AS skipped
                     FROM decode_issues WHERE {ctx.period.events('ts')} GROUP BY ALL),
        worst AS (SELECT capture FROM per GROUP BY capture ORDER BY sum(skipped) DESC, sum(n) DESC, capture
                  LIMIT {SHOWN})
        SELECT * FROM per WHERE capture IN (SELECT capture FROM worst) ORDER BY capture, issue_kind""")
    captures = ctx.rows(f"""
        WITH issues AS (SELECT capture, count(*) AS n, coalesce(sum(bytes_skipped), 0) AS skipped
                        FROM decode_issues WHERE {ctx.period.events('ts')} GROUP BY capture)
        SELECT c.path, c.status, c.format, c.packets, c.size_bytes, coalesce(i.n, 0), coalesce(i.skipped, 0), c.error
        FROM captures c LEFT JOIN issues i ON i.capture = c.path
        WHERE {ctx.period.overlaps('c.first_ts', 'c.last_ts', date='c.date')} AND (c.status <> 'ok' OR i.n > 0)
        ORDER BY c.status = 'ok', coalesce(i.skipped, 0) DESC, c.path LIMIT {ctx.limit * 2}""")
    if not issues and not captures:
        section.notes.append(NOTHING if not _any_capture(ctx) else "Every capture in this period decoded cleanly.")
        return section
    prefix = common_folder([r[0] for r in issues] + [r[0] for r in captures])
    if prefix:
        section.notes.append(f"Captures are named relative to {prefix}")
    if issues:
        section.figures.append(_per_capture(issues, prefix))
    section.tables.append(Table(["capture", "status", "format", "packets", "bytes", "issues", "bytes skipped", "error"],
                                [(r[0][len(prefix):], *r[1:]) for r in captures],
                                "captures that were partial, failed, or had decode issues"))
    return section


def _per_capture(issues, prefix: str) -> go.Figure:
    order = list(dict.fromkeys(r[0] for r in issues))
    labels = {c: shorten(c[len(prefix):], 44) for c in order}
    fig = make_subplots(rows=1, cols=2, subplot_titles=("issues", "bytes skipped"), shared_yaxes=True,
                        horizontal_spacing=0.04)
    for index, kind in enumerate(sorted({r[1] for r in issues})):
        mine = [r for r in issues if r[1] == kind]
        for col, value in ((1, 2), (2, 3)):
            fig.add_trace(go.Bar(orientation="h", y=[labels[r[0]] for r in mine], x=[r[value] for r in mine],
                                 name=kind, legendgroup=kind, showlegend=col == 1, marker={"color": colour(index)},
                                 hovertemplate="%{y}<br>" + kind + ": %{x:,}<extra></extra>"), row=1, col=col)
    fig.update_layout(template="plotly_white", height=160 + 24 * len(order), barmode="stack", font={"size": 12},
                      margin={"l": 260, "r": 20, "t": 50, "b": 40},
                      legend={"orientation": "h", "yanchor": "bottom", "y": 1.08, "x": 0})
    fig.update_yaxes(autorange="reversed", type="category", categoryorder="array", categoryarray=[labels[c] for c in order])
    return fig


def common_folder(paths: list[str]) -> str:
    """The folder all the paths share (with its trailing slash), or ''."""
    if len(set(paths)) < 2:
        return posixpath.dirname(paths[0]) + "/" if paths else ""
    prefix = posixpath.commonprefix(paths)
    return prefix[:prefix.rfind("/") + 1]


def _any_capture(ctx) -> bool:
    return bool(ctx.one(f"SELECT count(*) FROM captures WHERE "
                        f"{ctx.period.overlaps('first_ts', 'last_ts')}")[0])
