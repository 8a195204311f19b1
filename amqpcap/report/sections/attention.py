"""What needs attention: the findings of the period (the `findings` table), errors first, each
linking to the section with its evidence."""

from __future__ import annotations

from amqpcap.report.charts import time_bars
from amqpcap.report.model import NOTHING, Link, Section, Table
from amqpcap.report.source import lake_findings
from amqpcap.rules.findings.listing import counts, grouped

# Where each kind's evidence is plotted (the sections' anchors).
EVIDENCE = {"consumer-ack-timeout": "acks", "slow-consumer": "acks", "unbounded-prefetch": "acks",
            "redelivery-loop": "acks", "unroutable": "errors", "publish-nacked": "confirms", "channel-error": "errors",
            "connection-error": "errors", "slow-rpc": "rpc", "heartbeat-timeout": "heartbeats",
            "missed-heartbeats": "heartbeats", "publisher-blocked": "flow", "flow-stopped": "flow",
            "connection-churn": "timeline", "channel-churn": "timeline", "large-message": "talkers",
            "deprecated-feature": "errors", "capture-loss": "decode", "tls-not-decoded": "timeline"}
COLUMNS = ["severity", "finding", "what happened", "connections", "first", "client", "capture", "evidence", "see"]


def build(ctx) -> Section:
    section = Section("attention", "What needs attention",
                      "The findings rules' diagnosis (the findings table): errors, then warnings, then notes; the "
                      "same finding on many connections is one row. Evidence: Wireshark frame numbers in the "
                      "capture named, delivery tags, message keys (messages.message_key). Thresholds: the [findings] "
                      "settings. The plot: findings per " + ctx.axis.bucket_text() + " bucket of their first "
                      "occurrence, by severity and kind.")
    rows = lake_findings(ctx.con, ctx.period)
    if rows is None:
        section.notes.append(f"{NOTHING} (This lake has no findings table yet: amqpcap run writes it.)")
        return section
    if not rows:
        section.notes.append(NOTHING)
        return section
    where = ctx.period.events("first_at")
    buckets = ctx.rows(f"""
        SELECT {ctx.axis.bucket('first_at')} AS bucket, severity || ' ' || kind AS label, count(*),
               string_agg(DISTINCT coalesce(client, ''), ', ')
        FROM findings WHERE {where} GROUP BY ALL ORDER BY bucket""")
    hover = {(b, label): f"clients: {clients}" for b, label, _, clients in buckets}
    section.figures.append(time_bars([r[:3] for r in buckets], ctx.axis, "findings", per_second=False, hover=hover))
    tally = counts(rows)
    section.notes.append(", ".join(f"{n} {severity}" for severity, n in tally.items() if n) + " findings.")
    shown = grouped(rows)
    limit = ctx.limit * 5
    section.tables.append(Table(COLUMNS, [
        (g["severity"], g["kind"], g["summary"], g["connections"], g.get("first_at"),
         g.get("client"), (g.get("capture") or "").rsplit("/", 1)[-1], g.get("evidence_json") or "",
         Link(EVIDENCE.get(g["kind"], "timeline"), f"#{EVIDENCE.get(g['kind'], 'timeline')}")) for g in shown[:limit]]))
    if len(shown) > limit:
        section.notes.append(f"The first {limit} of {len(shown)}: amqpcap findings --lake LAKE lists them all.")
    return section
