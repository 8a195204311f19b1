"""Shared by the latency sections: percentiles per group, slowest first, as rows and as a table."""

from __future__ import annotations

from amqpcap.report.charts import PERCENTILE_NAMES, log_bin, percentiles
from amqpcap.report.model import Table


def binned(ctx, table: str, column: str, series: str, where: str) -> dict[str, list[tuple[int, int]]]:
    """{series value: [(log bin, count)]} for a latency histogram."""
    out: dict[str, list[tuple[int, int]]] = {}
    for name, b, n in ctx.rows(f"SELECT {series}, {log_bin(column)} AS bin, count(*) FROM {table} "
                               f"WHERE {where} GROUP BY ALL ORDER BY 1, 2"):
        out.setdefault(str(name), []).append((b, n))
    return out


def overall(ctx, table: str, column: str, where: str) -> str:
    n, q = ctx.one(f"SELECT count(*), {percentiles(column)} FROM {table} WHERE {where}")
    return f"p50 {q[0]:.3g} ms, p95 {q[1]:.3g} ms, p99 {q[2]:.3g} ms over {n:,}" if n else ""


def slowest_groups(ctx, table: str, column: str, where: str, label: str, group_by: str):
    """([(label, count, [p50, p95, p99], max)], number of groups): the ctx.limit groups with the
    highest p99. `label` is an expression over each group (an aggregate unless it is the key)."""
    grouped = (f"SELECT {label} AS label, count(*) AS n, {percentiles(column)} AS q, max({column}) AS top "
               f"FROM {table} WHERE {where} GROUP BY {group_by}")
    rows = ctx.rows(f"SELECT * FROM ({grouped}) ORDER BY q[3] DESC, n DESC, label LIMIT {ctx.limit}")
    total = ctx.one(f"SELECT count(*) FROM ({grouped})")[0]
    return rows, total


def percentile_table(rows, total: int, what: str) -> Table:
    """rows from slowest_groups; `what` names one group (queue, consumer...)."""
    caption = f"the {len(rows)} slowest of {total:,} by p99" if total > len(rows) else ""
    return Table([what, "count", *(f"{n} ms" for n in PERCENTILE_NAMES), "max ms"],
                 [(label, n, *(q or (None, None, None)), top) for label, n, q, top in rows], caption)
