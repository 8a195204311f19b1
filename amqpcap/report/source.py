"""The lake, opened for a report: DuckDB views over each table's snapshot (amqpcap.lake), and the
few ways the sections query them. Every query aggregates in DuckDB; only its small result reaches
Python."""

from __future__ import annotations

import os
from dataclasses import dataclass

from amqpcap.report.period import Period
from amqpcap.report.timeaxis import TimeAxis, build_axis


class LakeError(Exception):
    """No lake at the path, or one without any table: nothing to report on."""


def open_lake(lake: str):
    """A DuckDB connection with one view per table, in UTC."""
    from amqpcap.lake import duckdb_views, runlog
    if "://" not in lake and not os.path.isdir(lake):
        raise LakeError(f"no lake at {lake}")
    if all(version is None for version in runlog.snapshot(lake).values()):
        raise LakeError(f"{lake} holds no amqpcap table (amqpcap run --lake {lake} writes them)")
    return utc(duckdb_views(lake))


def utc(con):
    """Timestamps are UTC in the lake; DuckDB would otherwise render them in the local zone."""
    con.execute("SET TimeZone = 'UTC'")
    return con


@dataclass
class Context:
    """What every section builder gets."""
    con: object
    period: Period
    axis: TimeAxis
    limit: int = 20  # rows in a "top N" plot or table

    @classmethod
    def of(cls, con, period: Period, limit: int = 20) -> Context:
        return cls(con, period, build_axis(con, period), limit)

    def has(self, table: str) -> bool:
        """The lake has the table (one written before it existed does not)."""
        return has_table(self.con, table)

    def rows(self, sql: str, params: list | None = None) -> list[tuple]:
        return self.con.execute(sql, params or []).fetchall()

    def one(self, sql: str, params: list | None = None) -> tuple:
        return self.con.execute(sql, params or []).fetchone()


def has_table(con, table: str) -> bool:
    return bool(con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?",
                            [table]).fetchone()[0])


def lake_findings(con, period: Period, severities: tuple[str, ...] | None = None) -> list[dict] | None:
    """The `findings` rows of the period (every column but run_id), first first; None when the lake
    has no findings table (one written before it existed)."""
    if not has_table(con, "findings"):
        return None
    only = f" AND severity IN ({', '.join(repr(s) for s in severities)})" if severities else ""
    cursor = con.execute(f"SELECT * EXCLUDE (run_id) FROM findings WHERE {period.events('first_at')}{only} "
                         "ORDER BY first_ns")
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, values)) for values in cursor.fetchall()]
