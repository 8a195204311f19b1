"""Where a run's table files become Delta table versions. One object per engine, same methods:

- `DeltaRsSink` (the embedded default, `deltalake`): executors write Parquet straight into the
  table folders, the driver commits one transaction per table from the files' metadata.
- `DeltaSparkSink` (Delta jars on Spark's classpath: a cluster, Databricks) is the job's
  (amqpcap.job.spark_sink): it needs the Spark session.

A rerun replaces the rows of its captures (the table's replace key: `source`, or `path` for
`captures`) and never duplicates them; other captures are untouched. A run that resumed connections
also removes the provisional rows of the run that saved them (`superseded`, docs/state.md).
"""

from __future__ import annotations

from typing import Protocol

from amqpcap.lake.paths import absolute
from amqpcap.tables.registry import Table


class Sink(Protocol):
    name: str

    def table_root(self) -> str:
        """Where executors write this run's table files (`<root>/<table>/date=D/...`)."""

    def commit(self, files: list[dict], replaced: set[str] | None, run_id: str, tables: tuple[Table, ...],
               kind: str = "run", captures=(), summary: dict | None = None, started: float | None = None,
               superseded: list[tuple[str, str]] = ()) -> dict[str, int]:
        """Make `files` (metadata rows from amqpcap.lake.tablefiles) the tables' new rows, replacing
        those of the `replaced` captures (None: every row, a rebuild) and the provisional rows of
        the `superseded` (connection, source) pairs; the versions written."""


class EngineError(Exception):
    pass


class DeltaRsSink:
    name = "delta-rs"

    def __init__(self, lake: str) -> None:
        self.lake = absolute(lake)

    def table_root(self) -> str:
        return self.lake

    def commit(self, files, replaced, run_id, tables, kind: str = "run", captures=(), summary=None,
               started=None, superseded=()):
        """All or nothing for readers, through the run log (amqpcap.lake.runlog)."""
        from amqpcap.lake.runlog import commit_run, manifest_of
        return commit_run(self.lake, manifest_of(run_id, kind, files, replaced, tables, captures, summary, started,
                                                 superseded))
