"""The report's header: which lake, which period, which runs wrote it, how the captures went."""

from __future__ import annotations

import datetime

from amqpcap.report.model import Header, Table
from amqpcap.report.timeaxis import duration_text, timestamp

RUNS_SHOWN = 10


def build_header(ctx, lake: str) -> Header:
    p = ctx.period
    in_period = p.overlaps("first_ts", "last_ts")
    if ctx.axis.empty:
        traffic = "no traffic in this period"
    else:
        start, end = timestamp(ctx.axis.start_us), timestamp(ctx.axis.end_us)
        traffic = (f"{start:%Y-%m-%d %H:%M:%S} to {end:%Y-%m-%d %H:%M:%S} UTC "
                   f"({duration_text(ctx.axis.end_us - ctx.axis.start_us)})")
    connections = p.overlaps("started_at", "ended_at")
    totals = ctx.one(f"""
        SELECT (SELECT count(*) FROM connections WHERE {connections}),
               (SELECT coalesce(sum(c2s_frames + s2c_frames), 0) FROM connections WHERE {connections}),
               (SELECT count(*) FROM publishes WHERE {p.events('published_at')}),
               (SELECT count(*) FROM deliveries WHERE {p.events('delivered_at')}),
               (SELECT count(*) FROM errors WHERE {p.events('ts')}),
               (SELECT count(*) FROM decode_issues WHERE {p.events('ts')})""")
    captures = Table(["status", "captures", "packets", "bytes"], ctx.rows(f"""
        SELECT status, count(*), coalesce(sum(packets), 0), coalesce(sum(size_bytes), 0) FROM captures
        WHERE {in_period} GROUP BY status ORDER BY status = 'ok' DESC, status"""), "captures")
    # The runs that wrote this period's rows: the captures' and (after an analyze) the connections'.
    runs = Table(["run", "kind", "started", "finished", "captures read"], ctx.rows(f"""
        SELECT run_id, kind, started_at, finished_at, len(captures) FROM runs
        WHERE run_id IN (SELECT run_id FROM captures WHERE {in_period})
           OR run_id IN (SELECT run_id FROM connections WHERE {connections})
        ORDER BY finished_at DESC LIMIT {RUNS_SHOWN}"""), "runs")
    all_runs, last = ctx.one("SELECT count(*), max(finished_at) FROM runs")
    notes = []
    if all_runs:
        notes.append(f"The lake holds {all_runs:,} completed run{'s' if all_runs != 1 else ''}, the last finished "
                     f"{last:%Y-%m-%d %H:%M:%S} UTC; tables are read as of that run.")
    return Header(
        lake=lake, period=p.describe(), traffic=traffic,
        generated=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        totals=list(zip(("connections", "frames", "publishes", "deliveries", "errors", "decode issues"), totals)),
        captures=captures, runs=runs, notes=notes)
