"""Where a run's table files become Delta table versions. One object per engine, same methods:

- `DeltaRsSink` (the embedded default, `deltalake`): executors write Parquet straight into the
  table folders, the driver commits one transaction per table from the files' metadata.
- `DeltaSparkSink` (Delta jars on Spark's classpath: a cluster, Databricks): executors write the
  same Parquet files into the run's staging area, then Spark writes them into each table with
  `replaceWhere` on the run's captures. (This machine cannot fetch the jars: the path is thin.)

A rerun replaces the rows of its captures (the table's replace key: `capture`, or `path` for
`captures`) and never duplicates them; other captures are untouched.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from amqp_decode.tables import TABLES, Table
from pipelines.tablefiles import filesystem_of, stats


class Sink(Protocol):
    name: str

    def table_root(self) -> str:
        """Where executors write this run's table files (`<root>/<table>/date=D/...`)."""

    def commit(self, files: list[dict], replaced: set[str] | None, run_id: str,
               tables: tuple[Table, ...]) -> dict[str, int]:
        """Make `files` (metadata rows from pipelines.tablefiles) the tables' new rows, replacing
        those of the `replaced` captures (None: every row, a rebuild); the versions written."""


class EngineError(Exception):
    pass


def absolute(lake: str) -> str:
    return lake if "://" in lake and not lake.startswith("file://") else os.path.abspath(lake.removeprefix("file://"))


def table_uri(lake: str, table: Table | str) -> str:
    return f"{absolute(lake).rstrip('/')}/{table if isinstance(table, str) else table.name}"


def delta_spark_loaded(spark) -> bool:
    try:
        spark._jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")
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

    def commit(self, files, replaced, run_id, tables):
        """One transaction per table; if one fails, the tables this run already committed are
        restored to their versions before the run (no partial run is left)."""
        from deltalake import DeltaTable
        versions: dict[str, int] = {}
        before: dict[str, int] = {}
        try:
            for table in tables:
                uri = table_uri(self.lake, table)
                if DeltaTable.is_deltatable(uri):
                    before[table.name] = DeltaTable(uri).version()
                mine = [f for f in files if f["table"] == table.name]
                versions[table.name] = self._commit(table, mine, replaced, run_id)
        except Exception:
            for name in versions:
                if name in before:
                    DeltaTable(table_uri(self.lake, name)).restore(before[name])
            raise
        return versions

    def _commit(self, table: Table, files: list[dict], replaced: set[str] | None, run_id: str) -> int:
        from deltalake import CommitProperties, DeltaTable, Schema
        from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions

        uri = table_uri(self.lake, table)
        now = int(time.time() * 1000)
        properties = CommitProperties(custom_metadata={
            "run_id": run_id, "captures": "all" if replaced is None else str(len(replaced))})
        schema = table.arrow(without=("date",)).remove_metadata()
        schema = pa.schema([pa.field("date", pa.date32()), *schema])
        adds = [AddAction(f["path"], f["size"], {"date": f["date"]}, now, True, f["stats"]) for f in files]
        if not DeltaTable.is_deltatable(uri):
            create_table_with_add_actions(uri, Schema.from_arrow(schema), adds, mode="append",
                                          partition_by=["date"], commit_properties=properties)
            return DeltaTable(uri).version()
        existing = DeltaTable(uri)
        removes = []
        for action in pa.table(existing.get_add_actions(flatten=True)).to_pylist():
            day = str(action.get("partition.date"))
            remove = RemoveAction(action["path"], True, now, action["size_bytes"], {"date": day})
            if replaced is None:
                removes.append(remove)
                continue
            held = self._captures_of(uri, table, action)
            if not held & replaced:
                continue
            removes.append(remove)
            if held - replaced:  # other captures share the file: keep their rows in a new one
                adds.append(self._rewrite(uri, table, action, day, replaced, now))
        existing.create_write_transaction(removes + adds, mode="append", schema=schema,
                                          partition_by=["date"], commit_properties=properties)
        return DeltaTable(uri).version()

    @staticmethod
    def _captures_of(uri: str, table: Table, action: dict) -> set[str]:
        key = table.replace_key
        low, high = action.get(f"min.{key}"), action.get(f"max.{key}")
        if low is not None and low == high:
            return {low}
        column = pq.read_table(f"{uri}/{action['path']}", columns=[key]).column(key)
        return {value for value in pc.unique(column).to_pylist() if value is not None}

    @staticmethod
    def _rewrite(uri: str, table: Table, action: dict, day: str, replaced: set[str], now: int):
        from deltalake.transaction import AddAction
        filesystem, _ = filesystem_of(uri)
        data = pq.read_table(f"{uri}/{action['path']}")
        kept = data.filter(pc.invert(pc.is_in(data.column(table.replace_key), pa.array(sorted(replaced)))))
        relative = f"date={day}/part-kept-{uuid.uuid4().hex[:12]}.parquet"
        pq.write_table(kept, f"{uri}/{relative}", compression="zstd")
        metadata = pq.read_metadata(f"{uri}/{relative}")
        size = filesystem.get_file_info(f"{uri}/{relative}").size
        return AddAction(relative, size, {"date": day}, now, True, json.dumps(stats(metadata)))


class DeltaSparkSink:
    name = "delta-spark"

    def __init__(self, spark, lake: str, staging: str) -> None:
        self.spark = spark
        self.lake = lake
        self.root = f"{staging}/tables"

    def table_root(self) -> str:
        return self.root

    def commit(self, files, replaced, run_id, tables):
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
            versions[table.name] = SparkDeltaTable.forPath(self.spark, uri).history(1).collect()[0]["version"]
        return versions
