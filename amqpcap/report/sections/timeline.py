"""A Gantt of connections and, inside each, its channels, coloured by how each ended."""

from __future__ import annotations

import plotly.graph_objects as go

from amqpcap.report.charts import figure, shorten
from amqpcap.report.model import NOTHING, Section, Table
from amqpcap.report.timeaxis import duration_text, timestamp

SHOWN = 50  # rows of the Gantt
END_COLOURS = {"close": "#54A24B", "heartbeat-timeout": "#B279A2", "fin": "#F58518", "rst": "#E45756",
               "port-reuse": "#9D755D", "capture-end": "#888888"}
CHANNEL_COLOURS = {"closed": "#4C78A8", "closed with an error": "#D62728", "open at the end": "#9ECAE9"}
ROW = 0.8  # height of a connection's band (rows are 1 apart)


def build(ctx) -> Section:
    section = Section("timeline", "Connection timeline",
                      "One row per connection (client → server), a bar from its first to its last packet coloured by "
                      "how it ended (the diamond marks the end); the thin bars inside are its channels, red when "
                      "closed with an error. Hover for details. " + ctx.axis.skipped_text())
    p = ctx.period
    where = p.overlaps("started_at", "ended_at")
    total = ctx.one(f"SELECT count(*) FROM connections WHERE {where}")[0]
    if not total:
        section.notes.append(NOTHING)
        return section
    # The connections that did not end with a close handshake, or closed it or a channel with an
    # error, matter most; then the longest.
    connections = ctx.rows(f"""
        SELECT connection, client, server, connection_name, vhost, auth_user,
               epoch_us({p.clip_start('started_at')}), epoch_us({p.clip_end('coalesce(ended_at, started_at)')}),
               coalesce(end_reason, 'capture-end'), close_code, close_text
        FROM connections WHERE {where}
        ORDER BY coalesce(end_reason, '') <> 'close' OR coalesce(close_code, 200) NOT IN (0, 200)
                 OR connection IN (SELECT connection FROM channels WHERE close_code NOT IN (0, 200)) DESC,
                 ended_at - started_at DESC, started_at LIMIT {SHOWN}""")
    connections.sort(key=lambda c: c[6])
    channels = ctx.rows("""
        SELECT connection, channel, epoch_us(opened_at), epoch_us(closed_at), close_code, close_text, close_initiator
        FROM channels WHERE connection IN (SELECT unnest(?::VARCHAR[]))
        ORDER BY opened_at NULLS FIRST""", [[c[0] for c in connections]])
    section.figures.append(_gantt(connections, channels, ctx.axis))
    if total > len(connections):
        section.notes.append(f"Showing {len(connections)} of {total:,} connections: those that did not end with a "
                             "close handshake, or closed it or a channel with an error, first; then the longest.")
    section.tables.append(Table(["ended by", "connections", "closed with an error code", "channels"], ctx.rows(f"""
        SELECT coalesce(end_reason, '(unknown)'), count(*), count(*) FILTER (WHERE close_code NOT IN (0, 200)),
               sum(channels_opened)
        FROM connections WHERE {where} GROUP BY ALL ORDER BY 2 DESC""")))
    return section


def _gantt(connections: list[tuple], channels: list[tuple], axis) -> go.Figure:
    rows = {c[0]: i for i, c in enumerate(connections)}
    spans = {c[0]: (c[6], c[7]) for c in connections}
    fig = figure(height=140 + 26 * len(connections), bargap=0)
    by_reason: dict[str, list] = {}
    for i, (_, client, server, name, vhost, user, start, end, reason, code, text) in enumerate(connections):
        detail = (f"{client} → {server}{' ' + name if name else ''}<br>vhost {vhost} user {user}<br>"
                  f"{duration_text(end - start)}, ended by {reason}" + (f": {code} {text}" if code else ""))
        by_reason.setdefault(reason, []).append((i, start, end, detail))
    for reason, bars in by_reason.items():
        colour = END_COLOURS.get(reason, "#888888")
        fig.add_trace(go.Bar(orientation="h", y=[b[0] for b in bars], base=[_at(b[1]) for b in bars],
                             x=[max(b[2] - b[1], 0) / 1000 for b in bars], width=ROW, opacity=0.3,
                             marker={"color": colour, "line": {"width": 0}}, name=f"connection ended by {reason}",
                             legendgroup=reason, hovertext=[b[3] for b in bars], hoverinfo="text"))
        fig.add_trace(go.Scatter(x=[_at(b[2]) for b in bars], y=[b[0] for b in bars], mode="markers",
                                 marker={"symbol": "diamond", "size": 8, "color": colour}, legendgroup=reason,
                                 showlegend=False, hovertext=[b[3] for b in bars], hoverinfo="text"))
    for state, bars in _channel_bars(channels, rows, spans).items():
        fig.add_trace(go.Bar(orientation="h", y=[b[0] for b in bars], base=[_at(b[1]) for b in bars],
                             x=[b[2] for b in bars], width=[b[3] for b in bars], name=f"channel {state}",
                             marker={"color": CHANNEL_COLOURS[state], "line": {"width": 0}},
                             hovertext=[b[4] for b in bars], hoverinfo="text"))
    labels = [shorten(f"{c[1]} → {c[2]}" + (f" {c[3]}" if c[3] else ""), 52) for c in connections]
    fig.update_layout(barmode="overlay", margin={"l": 260})
    axis.apply(fig)
    fig.update_yaxes(tickvals=list(range(len(labels))), ticktext=labels, autorange="reversed", showgrid=False,
                     zeroline=False, range=[len(labels) - 0.5, -0.5])
    return fig


def _channel_bars(channels, rows, spans) -> dict[str, list]:
    """Channels in lanes inside their connection's band: overlapping channels get lanes of their own."""
    per_connection: dict[str, list] = {}
    for ch in channels:
        if ch[0] in rows:
            per_connection.setdefault(ch[0], []).append(ch)
    out: dict[str, list] = {state: [] for state in CHANNEL_COLOURS}
    for connection, mine in per_connection.items():
        first, last = spans[connection]
        placed, lane_ends = [], []
        for _, number, opened, closed, code, text, initiator in mine:
            start = max(opened if opened is not None else first, first)
            end = min(closed if closed is not None else last, last)
            if end < start or (closed is not None and closed < first):
                continue  # closed before the period
            lane = next((k for k, free in enumerate(lane_ends) if free <= start), len(lane_ends))
            if lane == len(lane_ends):
                lane_ends.append(end)
            lane_ends[lane] = end
            state = ("open at the end" if closed is None else
                     "closed with an error" if code not in (None, 0, 200) else "closed")
            detail = f"channel {number}: {duration_text(end - start)}, " + (
                state if closed is None else f"closed by the {initiator}" + (f": {code} {text}" if code else ""))
            placed.append((lane, start, end, state, detail))
        band = ROW * 0.85 / len(lane_ends)
        for lane, start, end, state, detail in placed:
            centre = rows[connection] - ROW * 0.85 / 2 + band * (lane + 0.5)
            out[state].append((centre, start, max(end - start, 0) / 1000, band * 0.8, detail))
    return {state: bars for state, bars in out.items() if bars}


def _at(us: int) -> str:
    return timestamp(us).isoformat()
