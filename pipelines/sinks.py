"""Where a run's table files become Delta table versions. One object per engine, same methods:

- `DeltaRsSink` (the embedded default, `deltalake`): executors write Parquet straight into the
  table folders, the driver commits one transaction per table from the files' metadata.
- `DeltaSparkSink` (Delta jars on Spark's classpath: a cluster, Databricks): executors write the
  same Parquet files into the run's staging area, then Spark writes them into each table with
  `replaceWhere` on the run's captures. (This machine cannot fetch the jars: the path is thin.)

A rerun replaces the rows of its captures (the table's replace key: `source`, or `path` for
`captures`) and never duplicates them; other captures are untouched. A run that resumed connections
also removes the provisional rows of the run that saved them (`superseded`, docs/state.md).
"""

from __future__ import annotations

from typing import Protocol

from amqp_decode.tables import Table
from pipelines.paths import absolute, table_uri


class Sink(Protocol):
    name: str

    def table_root(self) -> str:
        """Where executors write this run's table files (`<root>/<table>/date=D/...`)."""

    def commit(self, files: list[dict], replaced: set[str] | None, run_id: str, tables: tuple[Table, ...],
               kind: str = "run", captures=(), summary: dict | None = None, started: float | None = None,
               superseded: list[tuple[str, str]] = ()) -> dict[str, int]:
        """Make `files` (metadata rows from pipelines.tablefiles) the tables' new rows, replacing
        those of the `replaced` captures (None: every row, a rebuild) and the provisional rows of
        the `superseded` (connection, source) pairs; the versions written."""


class EngineError(Exception):
    pass


def delta_spark_loaded(spark) -> bool:
    try:
        spark.sparkContext._jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")
        return True
    except Exception:  # py4j wraps ClassNotFoundException
        return False


def choose_sink(engine: str, spark, lake: str, staging: str) -> Sink:
    loaded = delta_spark_loaded(spark)
    if engine == "delta-spark" and not loaded:
        raise EngineError("lake.engine is delta-spark but the Delta jars are not on Spark's classpath (add "
                          "io.delta:delta-spark to spark.jars or the cluster image), or use engine = \"delta-rs\"")
    if engine == "delta-spark" or (engine == "auto" and loaded):
        return DeltaSparkSink(spark, lake, staging)
    return DeltaRsSink(lake)


class DeltaRsSink:
    name = "delta-rs"

    def __init__(self, lake: str) -> None:
        self.lake = absolute(lake)

    def table_root(self) -> str:
        return self.lake

    def commit(self, files, replaced, run_id, tables, kind: str = "run", captures=(), summary=None,
               started=None, superseded=()):
        """All or nothing for readers, through the run log (pipelines.runlog)."""
        from pipelines.runlog import commit_run, manifest_of
        return commit_run(self.lake, manifest_of(run_id, kind, files, replaced, tables, captures, summary, started,
                                                 superseded))


class DeltaSparkSink:
    name = "delta-spark"

    def __init__(self, spark, lake: str, staging: str) -> None:
        self.spark = spark
        self.lake = lake
        self.root = f"{staging}/tables"

    def table_root(self) -> str:
        return self.root

    def commit(self, files, replaced, run_id, tables, kind: str = "run", captures=(), summary=None,
               started=None, superseded=()):
        from delta.tables import DeltaTable as SparkDeltaTable

        from pipelines.spark_types import struct_type
        versions = {}
        for table in tables:
            uri = table_uri(self.lake, table)
            folder = f"{self.root}/{table.name}"
            paths = [f"{folder}/{f['path']}" for f in files if f["table"] == table.name]
            frame = (self.spark.read.option("basePath", folder).schema(struct_type(table)).parquet(*paths)
                     if paths else self.spark.createDataFrame([], struct_type(table)))
            writer = frame.select(*table.names).write.format("delta").mode("overwrite").partitionBy("date")
            if replaced is not None:
                quoted = ", ".join("'" + c.replace("'", "''") + "'" for c in sorted(replaced))
                writer = writer.option("replaceWhere", f"{table.replace_key} IN ({quoted})")
            writer.save(uri)
            if superseded and "provisional" in table.names:
                SparkDeltaTable.forPath(self.spark, uri).delete(_superseded_condition(table, superseded))
            versions[table.name] = SparkDeltaTable.forPath(self.spark, uri).history(1).collect()[0]["version"]
        return versions


def _superseded_condition(table: Table, superseded) -> str:
    """SQL for the provisional rows the (connection, source) pairs supersede."""
    def quoted(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"
    columns = [c for c in ("connection", "publisher_connection", "consumer_connection") if c in table.names]
    pairs = " OR ".join(f"({column} = {quoted(c)} AND source = {quoted(s)})" for c, s in superseded for column in columns)
    return f"provisional AND ({pairs})"
