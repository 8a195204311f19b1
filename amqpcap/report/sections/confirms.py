"""Publish -> confirm: how long the broker takes to confirm what publishers send (publishes)."""

from __future__ import annotations

from amqpcap.report.charts import log_histogram, percentile_dots
from amqpcap.report.model import NOTHING, Section
from amqpcap.report.sections.latency import binned, overall, percentile_table, slowest_groups

LATENCY = "confirm_latency_ms"
# The default exchange is the empty name: show it readably.
ROUTE = "coalesce(nullif(exchange, ''), '(default)') || ' / ' || coalesce(routing_key, '')"


def build(ctx) -> Section:
    section = Section("confirms", "Publish → confirm latency",
                      "Time from basic.publish to the broker's confirm (basic.ack or basic.nack) on channels in "
                      "confirm mode. First plot: how often each latency occurs (log scale); dots: p50/p95/p99 per "
                      "exchange / routing key, slowest first.")
    where = f"confirm_outcome IN ('ack', 'nack') AND {LATENCY} IS NOT NULL AND {ctx.period.events('published_at')}"
    series = binned(ctx, "publishes", LATENCY, "confirm_outcome", where)
    if not series:
        section.notes.append(NOTHING)
        return section
    section.figures.append(log_histogram(series, "publish → confirm latency (ms, log scale)"))
    unconfirmed, unconfirmed_mode = ctx.one(
        "SELECT count(*) FILTER (WHERE confirm_outcome = 'unconfirmed'), count(*) FILTER (WHERE confirm_outcome IS NULL) "
        f"FROM publishes WHERE {ctx.period.events('published_at')}")
    section.notes.append(f"Confirmed publishes: {overall(ctx, 'publishes', LATENCY, where)}. Not in the plots: "
                         f"{unconfirmed:,} never confirmed in the capture, {unconfirmed_mode:,} on channels not in "
                         "confirm mode.")
    routes = slowest_groups(ctx, "publishes", LATENCY, where, ROUTE, "exchange, routing_key")
    section.figures.append(percentile_dots([r[:3] for r in routes[0]], "confirm latency per exchange / routing key (ms)"))
    section.tables.append(percentile_table(*routes, "exchange / routing key"))
    return section
