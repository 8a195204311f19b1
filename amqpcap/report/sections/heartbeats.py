"""Heartbeat silences and timeouts (heartbeats, per connection and direction)."""

from __future__ import annotations

import plotly.graph_objects as go

from amqpcap.report.charts import colour, figure
from amqpcap.report.model import NOTHING, Section, Table

STEP = 0.25   # histogram bins, in multiples of the agreed interval
CAP = 4.0     # silences of CAP intervals or more share the last bin
SILENCE_RATIO = "longest_silence_s / heartbeat_s"


def build(ctx) -> Section:
    section = Section("heartbeats", "Heartbeat silences and timeouts",
                      "Per connection and direction, the longest time without any frame, in multiples of the agreed "
                      "heartbeat interval: past the dashed line (twice the interval) a peer may declare the "
                      "connection dead. The table lists the directions that went silent that long.")
    # heartbeats rows carry no time of their own: they follow their connection into the period.
    scope = (f"connection IN (SELECT connection FROM connections "
             f"WHERE {ctx.period.overlaps('started_at', 'ended_at')})")
    with_beat, without, long_silences, timed_out = ctx.one(f"""
        SELECT count(*) FILTER (WHERE heartbeat_s > 0), count(*) FILTER (WHERE coalesce(heartbeat_s, 0) = 0),
               coalesce(sum(long_silences), 0), count(*) FILTER (WHERE ended_after_silence)
        FROM heartbeats WHERE {scope}""")
    if not with_beat and not without:
        section.notes.append(NOTHING)
        return section
    timeouts = ctx.one(f"SELECT count(*) FROM connections WHERE end_reason = 'heartbeat-timeout' "
                       f"AND {ctx.period.overlaps('started_at', 'ended_at')}")[0]
    section.notes.append(f"{with_beat:,} connection directions agreed on a heartbeat, {without:,} did not; "
                         f"{long_silences:,} silences longer than twice the interval; {timed_out:,} directions "
                         f"ended after such a silence; {timeouts:,} connections ended by a heartbeat timeout.")
    bins = ctx.rows(f"""
        SELECT direction, least(floor({SILENCE_RATIO} / {STEP}) * {STEP}, {CAP}) AS bin, count(*)
        FROM heartbeats WHERE heartbeat_s > 0 AND longest_silence_s IS NOT NULL AND {scope}
        GROUP BY ALL ORDER BY 1, 2""")
    if bins:
        section.figures.append(_histogram(bins))
    worst = ctx.rows(f"""
        SELECT h.client, h.server, h.direction, h.heartbeat_s, h.heartbeats, h.longest_silence_s, h.long_silences,
               h.final_silence_s, h.ended_after_silence, c.end_reason
        FROM heartbeats h LEFT JOIN connections c ON c.connection = h.connection
        WHERE h.{scope} AND (h.long_silences > 0 OR h.ended_after_silence OR c.end_reason = 'heartbeat-timeout')
        ORDER BY h.longest_silence_s / nullif(h.heartbeat_s, 0) DESC NULLS LAST LIMIT {ctx.limit}""")
    if worst:
        section.tables.append(Table(["client", "server", "direction", "heartbeat s", "heartbeats", "longest silence s",
                                     "long silences", "final silence s", "ended after silence", "connection ended by"],
                                    worst))
    elif not bins:
        section.notes.append("No connection agreed on a heartbeat, and none went silent.")
    return section


def _histogram(bins: list[tuple]) -> go.Figure:
    fig = figure()
    directions = sorted({d for d, _, _ in bins})
    for index, direction in enumerate(directions):
        mine = [(b, n) for d, b, n in bins if d == direction]
        fig.add_trace(go.Bar(x=[b for b, _ in mine], y=[n for _, n in mine], name=direction, offset=0,
                             width=STEP * 0.95, marker={"color": colour(index)},
                             hovertemplate="%{x:.2f}–" + "%{customdata:.2f} × interval: %{y:,}<extra>" + direction
                                           + "</extra>", customdata=[b + STEP for b, _ in mine]))
    fig.add_vline(x=2, line={"dash": "dash", "color": "#D62728"}, annotation_text="2 × interval",
                  annotation_position="top right")
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title=f"longest silence ÷ agreed interval (the last bin: {CAP:g} or more)",
                     range=[0, CAP + STEP])
    fig.update_yaxes(title="connection directions")
    return fig
