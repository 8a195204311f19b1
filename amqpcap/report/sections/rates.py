"""Message rates over time: publishes per exchange, deliveries per queue."""

from __future__ import annotations

from amqpcap.report.charts import OTHER, time_bars
from amqpcap.report.model import NOTHING, Section

SERIES = 8  # the busiest labels get a colour each; the rest add up in OTHER


def build(ctx) -> Section:
    section = Section("rates", "Message rates",
                      f"Messages per second in each {ctx.axis.bucket_text()} bucket: published per exchange (top), "
                      "delivered per queue (bottom); the busiest have a colour each, the rest are grey. "
                      + ctx.axis.skipped_text())
    published = _per_bucket(ctx, "publishes", "published_at", "coalesce(nullif(exchange, ''), '(default)')")
    delivered = _per_bucket(ctx, "deliveries", "delivered_at", "coalesce(queue, '(queue not captured)')")
    if not published and not delivered:
        section.notes.append(NOTHING)
        return section
    for rows, what, series in (published, "published", "exchange"), (delivered, "delivered", "queue"):
        if rows:
            fig = time_bars(rows, ctx.axis, f"{what} / s")
            fig.update_layout(legend={"title": {"text": f"{series}: "}})
            section.figures.append(fig)
        else:
            section.notes.append(f"No message {what} in this period.")
    return section


def _per_bucket(ctx, table: str, at: str, label: str) -> list[tuple]:
    return ctx.rows(f"""
        WITH rows AS (SELECT {label} AS label, {ctx.axis.bucket(at)} AS bucket FROM {table}
                      WHERE {at} IS NOT NULL AND {ctx.period.events(at)}),
        busiest AS (SELECT label FROM rows GROUP BY label ORDER BY count(*) DESC, label LIMIT {SERIES})
        SELECT bucket, CASE WHEN label IN (SELECT label FROM busiest) THEN label ELSE '{OTHER}' END AS series,
               count(*)
        FROM rows GROUP BY ALL ORDER BY bucket""")
