"""What needs attention: the findings of the period (the `findings` table), errors first, each
linking to the section with its evidence."""

from __future__ import annotations

from amqpcap.report.model import Link, Section, Table
from amqpcap.rules.findings.listing import counts, grouped

# Where each kind's evidence is plotted (the sections' anchors).
EVIDENCE = {"consumer-ack-timeout": "acks", "slow-consumer": "acks", "unbounded-prefetch": "acks",
            "redelivery-loop": "acks", "unroutable": "errors", "publish-nacked": "confirms", "channel-error": "errors",
            "connection-error": "errors", "slow-rpc": "rpc", "heartbeat-timeout": "heartbeats",
            "missed-heartbeats": "heartbeats", "publisher-blocked": "flow", "flow-stopped": "flow",
            "connection-churn": "timeline", "channel-churn": "timeline", "large-message": "talkers",
            "deprecated-feature": "errors", "capture-loss": "decode_issues", "tls-not-decoded": "timeline"}
COLUMNS = ["severity", "finding", "what happened", "connections", "first", "client", "capture", "evidence", "see"]


def build(ctx) -> Section:
    section = Section("attention", "What needs attention",
                      "The findings rules' diagnosis (the findings table): errors, then warnings, then notes; the "
                      "same finding on many connections is one row. Evidence: Wireshark frame numbers in the "
                      "capture named, delivery tags, message keys (messages.message_key). Thresholds: the [findings] "
                      "settings.")
    if not ctx.has("findings"):
        section.notes.append("This lake has no findings table yet (amqpcap run writes it).")
        return section
    cursor = ctx.con.execute(f"SELECT * EXCLUDE (run_id) FROM findings WHERE {ctx.period.events('first_at')}")
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, values)) for values in cursor.fetchall()]
    if not rows:
        section.notes.append("Nothing needs attention in this period: no finding.")
        return section
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
