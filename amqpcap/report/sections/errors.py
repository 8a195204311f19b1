"""Errors over time by reply code, and what failed (errors)."""

from __future__ import annotations

from amqpcap.report.charts import time_bars
from amqpcap.report.model import NOTHING, Section, Table

# basic.nack from the broker has no reply code: it is named by its method.
CODE = "CASE WHEN reply_code IS NULL THEN method ELSE reply_code || ' ' || coalesce(reply_name, '?') END"


def build(ctx) -> Section:
    section = Section("errors", "Errors",
                      f"Errors the protocol signalled (non-200 connection.close and channel.close, basic.return, "
                      f"broker basic.nack) per {ctx.axis.bucket_text()} bucket, by reply code; hover for the failing "
                      "methods. The table names each kind and what caused it. " + ctx.axis.skipped_text())
    where = ctx.period.events("ts")
    buckets = ctx.rows(f"""
        SELECT {ctx.axis.bucket('ts')} AS bucket, {CODE} AS code, count(*),
               string_agg(DISTINCT coalesce(failing_method, '(none)'), ', ' ORDER BY coalesce(failing_method, '(none)'))
        FROM errors WHERE {where} GROUP BY ALL ORDER BY bucket""")
    if not buckets:
        section.notes.append(NOTHING)
        return section
    hover = {(b, code): f"failing: {methods}" for b, code, _, methods in buckets}
    section.figures.append(time_bars([r[:3] for r in buckets], ctx.axis, "errors", per_second=False, hover=hover))
    kinds = ctx.rows(f"""
        SELECT method, initiator, reply_code, reply_name, failing_method, count(*) AS n,
               count(DISTINCT connection), min(ts), max(ts), any_value(reply_text)
        FROM errors WHERE {where}
        GROUP BY method, initiator, reply_code, reply_name, failing_method
        ORDER BY n DESC, reply_code NULLS LAST, method LIMIT {ctx.limit * 2}""")
    section.tables.append(Table(["method", "sent by", "reply code", "name", "failing method", "count", "connections",
                                 "first", "last", "example text"], kinds))
    return section
