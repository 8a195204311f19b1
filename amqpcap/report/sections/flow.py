"""Flow control: channel.flow pauses and connection.blocked intervals (flow_control)."""

from __future__ import annotations

import plotly.graph_objects as go

from amqpcap.report.charts import colour, figure, shorten
from amqpcap.report.model import NOTHING, Section, Table
from amqpcap.report.timeaxis import duration_text, timestamp

SHOWN = 40


def build(ctx) -> Section:
    section = Section("flow", "Blocked and flow-stopped intervals",
                      "Each bar is a time a peer could not publish: connection.blocked (the broker, out of memory or "
                      "disk) or channel.flow active=false; hatched bars never resumed in the capture and are drawn to "
                      "the connection's end. " + ctx.axis.skipped_text())
    p = ctx.period
    # An interval never resumed in the capture lasts, as far as we know, until its connection's end.
    ended = "coalesce(f.ended_at, c.ended_at)"
    rows = ctx.rows(f"""
        SELECT f.client, f.server, f.channel, f.mechanism, f.initiator, f.reason,
               epoch_us({p.clip_start('f.started_at')}), epoch_us({p.clip_end(ended)}), f.ended_at IS NULL,
               f.started_at, f.ended_at, f.duration_ms
        FROM flow_control f LEFT JOIN connections c ON c.connection = f.connection
        WHERE f.started_at IS NOT NULL AND {p.overlaps('f.started_at', ended, date='f.date')}
        ORDER BY epoch_us({ended}) - epoch_us(f.started_at) DESC NULLS FIRST LIMIT {SHOWN}""")
    if not rows:
        section.notes.append(NOTHING)
        return section
    rows.sort(key=lambda r: r[6])
    section.figures.append(_bars(rows, ctx.axis))
    section.tables.append(Table(["client", "server", "channel", "mechanism", "stopped by", "reason", "from", "to",
                                 "duration ms"], [(*r[:6], *r[9:]) for r in rows]))
    return section


def _bars(rows, axis) -> go.Figure:
    labels = [shorten(f"{r[0]} ch {r[2]} #{i + 1}", 40) for i, r in enumerate(rows)]
    fig = figure(height=160 + 26 * len(rows))
    for index, mechanism in enumerate(sorted({r[3] for r in rows})):
        mine = [(label, r) for label, r in zip(labels, rows) if r[3] == mechanism]
        fig.add_trace(go.Bar(
            orientation="h", y=[label for label, _ in mine], base=[timestamp(r[6]).isoformat() for _, r in mine],
            x=[max((r[7] or r[6]) - r[6], 0) / 1000 for _, r in mine], name=mechanism,
            marker={"color": colour(index + 3), "pattern": {"shape": ["/" if r[8] else "" for _, r in mine]}},
            hovertext=[f"{mechanism} by the {r[4]}{': ' + r[5] if r[5] else ''}<br>"
                       f"{duration_text((r[7] or r[6]) - r[6])}{' (not resumed in the capture)' if r[8] else ''}"
                       for _, r in mine], hoverinfo="text"))
    fig.update_layout(barmode="overlay", margin={"l": 220})
    # Flow intervals are often short: this plot zooms to them rather than the whole period.
    axis.apply(fig, whole_period=False)
    fig.update_yaxes(autorange="reversed", type="category", categoryorder="array", categoryarray=labels)
    return fig
