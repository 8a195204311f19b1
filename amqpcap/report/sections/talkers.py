"""Top talkers: the connections and routing keys that carry the most messages and bytes (messages)."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from amqpcap.report.charts import colour, shorten
from amqpcap.report.model import NOTHING, Section, Table

SHOWN = 15
PUBLISHED = "method = 'basic.publish'"
DELIVERED = "method IN ('basic.deliver', 'basic.get-ok')"


def build(ctx) -> Section:
    section = Section("talkers", "Top talkers",
                      "The connections (client → server) and the exchange / routing keys that carried the most "
                      "messages (left) and body bytes (right); a connection's bar splits what it published from what "
                      "was delivered to it.")
    where = ctx.period.events("ts")
    per_connection = f"""
        SELECT connection, any_value(client) || ' → ' || any_value(server) AS label,
               count(*) FILTER (WHERE {PUBLISHED}) AS published, count(*) FILTER (WHERE {DELIVERED}) AS delivered,
               coalesce(sum(body_size) FILTER (WHERE {PUBLISHED}), 0) AS published_bytes,
               coalesce(sum(body_size) FILTER (WHERE {DELIVERED}), 0) AS delivered_bytes
        FROM messages WHERE {where} AND ({PUBLISHED} OR {DELIVERED}) GROUP BY connection"""
    by_messages = ctx.rows(f"SELECT * FROM ({per_connection}) ORDER BY published + delivered DESC, label LIMIT {SHOWN}")
    if not by_messages:
        section.notes.append(NOTHING)
        return section
    by_bytes = ctx.rows(f"SELECT * FROM ({per_connection}) "
                        f"ORDER BY published_bytes + delivered_bytes DESC, label LIMIT {SHOWN}")
    names = dict(ctx.rows("SELECT connection, any_value(connection_name) FROM connections "
                          "WHERE connection IN (SELECT unnest(?::VARCHAR[])) AND connection_name IS NOT NULL "
                          "GROUP BY connection", [[r[0] for r in by_messages + by_bytes]]))

    def label(row) -> str:
        return row[1] + (f" ({names[row[0]]})" if names.get(row[0]) else "")

    fig = _pair(by_messages, by_bytes, label, (("published", 2, 4), ("delivered", 3, 5)))
    section.figures.append(fig)

    route = "coalesce(nullif(exchange, ''), '(default)') || ' / ' || coalesce(routing_key, '')"
    per_route = (f"SELECT NULL, {route} AS label, count(*) AS n, coalesce(sum(body_size), 0) AS bytes "
                 f"FROM messages WHERE {where} AND {PUBLISHED} GROUP BY exchange, routing_key")
    routes_n = ctx.rows(f"SELECT * FROM ({per_route}) ORDER BY n DESC, label LIMIT {SHOWN}")
    routes_b = ctx.rows(f"SELECT * FROM ({per_route}) ORDER BY bytes DESC, label LIMIT {SHOWN}")
    if routes_n:
        section.figures.append(_pair(routes_n, routes_b, lambda r: r[1], (("published", 2, 3),)))
    section.tables.append(Table(["connection", "published", "delivered", "published bytes", "delivered bytes"],
                                [(label(r), *r[2:]) for r in by_messages], "by messages"))
    section.tables.append(Table(["exchange / routing key", "published", "bytes"], [r[1:] for r in routes_n],
                                "routing keys by messages"))
    return section


def _pair(by_messages, by_bytes, label, parts) -> go.Figure:
    """Two ranked horizontal bar charts side by side: by messages, by bytes. parts: (name, messages
    column, bytes column) stacked in each bar."""
    height = 140 + 24 * max(len(by_messages), len(by_bytes))
    fig = make_subplots(rows=1, cols=2, subplot_titles=("messages", "body bytes"), horizontal_spacing=0.32)
    for index, (name, n_column, b_column) in enumerate(parts):
        for col, rows, column in ((1, by_messages, n_column), (2, by_bytes, b_column)):
            fig.add_trace(go.Bar(orientation="h", x=[r[column] for r in rows],
                                 y=[shorten(label(r), 44) for r in rows], name=name, legendgroup=name,
                                 showlegend=col == 1 and len(parts) > 1, marker={"color": colour(index)},
                                 hovertext=[label(r) for r in rows],
                                 hovertemplate="%{hovertext}<br>" + name + ": %{x:,}<extra></extra>"),
                          row=1, col=col)
    fig.update_layout(template="plotly_white", height=height, barmode="stack", font={"size": 12},
                      margin={"l": 250, "r": 20, "t": 50, "b": 40},
                      legend={"orientation": "h", "yanchor": "bottom", "y": 1.06, "x": 0})
    fig.update_yaxes(autorange="reversed", type="category")
    return fig
