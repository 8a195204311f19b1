"""Deliver -> ack: how long consumers take to settle what the broker delivers (deliveries)."""

from __future__ import annotations

from amqpcap.report.charts import log_histogram, percentile_dots
from amqpcap.report.model import NOTHING, Section
from amqpcap.report.sections.latency import binned, overall, percentile_table, slowest_groups

LATENCY = "settle_latency_ms"
SETTLED = f"outcome IN ('ack', 'nack', 'reject') AND {LATENCY} IS NOT NULL"


def build(ctx) -> Section:
    section = Section("acks", "Deliver → ack latency",
                      "Time from basic.deliver (or get-ok) to the consumer's ack, nack or reject. First plot: how "
                      "often each latency occurs (log scale); dots: p50/p95/p99 per queue and per consumer, slowest "
                      "first. A long tail means slow or stalled consumers.")
    where = f"{SETTLED} AND {ctx.period.events('delivered_at')}"
    series = binned(ctx, "deliveries", LATENCY, "outcome", where)
    if not series:
        section.notes.append(NOTHING)
        return section
    section.figures.append(log_histogram(series, "deliver → settle latency (ms, log scale)"))
    auto, unsettled, closed = ctx.one(
        "SELECT count(*) FILTER (WHERE outcome = 'auto-ack'), count(*) FILTER (WHERE outcome = 'unsettled'), "
        "count(*) FILTER (WHERE outcome IN ('channel-closed', 'connection-closed')) FROM deliveries "
        f"WHERE {ctx.period.events('delivered_at')}")
    section.notes.append(f"Settled deliveries: {overall(ctx, 'deliveries', LATENCY, where)}. Not in the plots: "
                         f"{auto:,} auto-acked, {unsettled:,} still unsettled when the capture ended, {closed:,} "
                         "outstanding when their channel or connection closed (the broker requeues those).")
    queues = slowest_groups(ctx, "deliveries", LATENCY, where, "coalesce(queue, '(queue not captured)')", "1")
    # Consumer tags are unique per channel only: a consumer is (connection, channel, tag).
    consumers = slowest_groups(ctx, "deliveries", LATENCY, where,
                               "coalesce(consumer_tag, '(basic.get)') || ' @ ' || any_value(client)",
                               "connection, channel, consumer_tag")
    section.figures.append((percentile_dots([r[:3] for r in queues[0]], "per queue (ms)", label_width=30),
                            percentile_dots([r[:3] for r in consumers[0]], "per consumer: tag @ client (ms)",
                                            label_width=36)))
    section.tables += [percentile_table(*queues, "queue"), percentile_table(*consumers, "consumer")]
    return section
