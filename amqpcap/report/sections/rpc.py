"""Synchronous requests and their replies (rpc_calls): how long the broker takes to answer each kind."""

from __future__ import annotations

from amqpcap.report.charts import percentile_dots, percentiles
from amqpcap.report.model import NOTHING, Section, Table


def build(ctx) -> Section:
    section = Section("rpc", "RPC latency per request",
                      "Each synchronous request (queue.declare, basic.consume, channel.open...) to its reply: dots "
                      "give p50/p95/p99 per request method, slowest first; the table also counts the requests "
                      "answered by an error close or never answered.")
    rows = ctx.rows(f"""
        SELECT request, count(*) AS n,
               count(*) FILTER (WHERE outcome = 'ok'), count(*) FILTER (WHERE outcome = 'error'),
               count(*) FILTER (WHERE outcome = 'no-reply'),
               {percentiles('latency_ms')} FILTER (WHERE latency_ms IS NOT NULL) AS q, max(latency_ms)
        FROM rpc_calls WHERE {ctx.period.events('request_at')}
        GROUP BY request ORDER BY q[3] DESC NULLS LAST, n DESC, request""")
    if not rows:
        section.notes.append(NOTHING)
        return section
    timed = [(request, n, q) for request, n, _, _, _, q, _ in rows if q and q[0] is not None]
    if timed:
        section.figures.append(percentile_dots(timed, "request → reply latency (ms)"))
    section.tables.append(Table(["request", "calls", "ok", "error", "no reply", "p50 ms", "p95 ms", "p99 ms", "max ms"],
                                [(r, n, ok, err, none, *(q or (None, None, None)), top)
                                 for r, n, ok, err, none, q, top in rows]))
    return section
