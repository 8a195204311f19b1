"""The Delta lake. Two engines write the same standard Delta tables:

- `delta-rs` (the embedded default, `deltalake`): executors write Parquet, the driver commits;
- `delta-spark`, where the Delta jars are on the classpath (a cluster, Databricks): Spark writes
  with `replaceWhere` on this run's captures. This environment cannot fetch the jars, so that path
  is kept thin and is not exercised by the tests here.

delta-rs in detail:

Each decode task writes its tables' rows as Parquet files under `<lake>/<table>/date=D/`,
one file per (date, capture) per task, and returns only file metadata: path, size, partition
value, the capture, and the statistics Delta readers use for data skipping. The driver then
commits one transaction per table: it removes the table's files whose rows came from the
captures of this run (each file holds one capture, so the match is exact) and adds the new ones.
A rerun over the same captures thus replaces their rows and never duplicates them; other
captures and other days are untouched. No table data passes through the driver.

`read_table` gives any table back as a Spark DataFrame, whichever engine wrote it.
"""

from __future__ import annotations

import datetime
import functools
import json
import time
import uuid
from typing import Iterator

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipelines.schemas import ANALYTICS_TABLES, CAPTURES, RAW_TABLES, Table
from pipelines.stages import untag

FILES_DDL = ("table string, path string, size bigint, date string, capture string, rows bigint, "
             "stats string")
TABLES = {t.name: t for t in RAW_TABLES + ANALYTICS_TABLES}


def replace_key(table: Table) -> str:
    """The column naming the capture a row came from (what a rerun replaces by)."""
    return "path" if table is CAPTURES else "capture"


def table_uri(lake: str, table: Table) -> str:
    return f"{lake.rstrip('/')}/{table.name}"


# -- executors -----------------------------------------------------------------------------------

def decode_and_write(segments, settings, uris: list[str], run_id: str, batch_rows: int, lake: str,
                     frames_counter=None):
    """Sorted segments -> one FILES_DDL row per Parquet file written: each task decodes its
    connections and writes their rows itself (one pass; only file metadata comes back)."""
    from pipelines.stages import settings_to_json
    task = functools.partial(decode_and_write_task, settings_json=settings_to_json(settings), uris=uris,
                             run_id=run_id, batch_rows=batch_rows, lake=lake, frames_counter=frames_counter)
    return segments.mapInArrow(task, FILES_DDL)


def decode_and_write_task(batches: Iterator[pa.RecordBatch], settings_json: str, uris: list[str],
                          run_id: str, batch_rows: int, lake: str, frames_counter=None):
    from pipelines.stages import table_batches
    pairs = table_batches(batches, settings_json, uris, run_id, batch_rows, frames_counter)
    return write_files_task(pairs, lake, run_id)


def write_dataframe(frame, table: Table, lake: str, run_id: str):
    """Any DataFrame with `table`'s columns -> Parquet files written by the executors; returns the
    FILES_DDL rows (for commit)."""
    def task(batches):
        return write_files_task(((table.name, batch) for batch in batches), lake, run_id)
    return frame.select(*table.names).mapInArrow(task, FILES_DDL)


def write_files_task(pairs, lake: str, run_id: str) -> Iterator[pa.RecordBatch]:
    """(table name, rows) pairs -> Parquet files, one per (table, date, capture); yields their
    metadata once every file is closed."""
    filesystem, root = _filesystem(lake)
    writers: dict[tuple[str, str, str], tuple[pq.ParquetWriter, str]] = {}
    for name, data in pairs:
        table = TABLES[name]
        key = replace_key(table)
        groups: dict[tuple, list[int]] = {}
        for i, (day, capture) in enumerate(zip(data.column("date").to_pylist(),
                                               data.column(key).to_pylist())):
            groups.setdefault((day.isoformat(), capture), []).append(i)
        for (day, capture), indices in groups.items():
            part = data.take(pa.array(indices)).drop_columns(["date"])
            slot = (name, day, capture)
            if slot not in writers:
                relative = f"date={day}/part-{run_id[:8]}-{uuid.uuid4().hex}.parquet"
                path = f"{root}/{name}/{relative}"
                filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
                writers[slot] = (pq.ParquetWriter(path, part.schema, filesystem=filesystem,
                                                  compression="zstd"), relative)
            writers[slot][0].write_batch(part)
    rows = {name: [] for name in ("table", "path", "size", "date", "capture", "rows", "stats")}
    for (name, day, capture), (writer, relative) in writers.items():
        writer.close()
        path = f"{root}/{name}/{relative}"
        metadata = pq.read_metadata(path, filesystem=filesystem)
        for column, value in zip(("table", "path", "size", "date", "capture", "rows", "stats"),
                                 (name, relative, filesystem.get_file_info(path).size, day, capture,
                                  metadata.num_rows, json.dumps(_stats(metadata)))):
            rows[column].append(value)
    if rows["table"]:
        yield pa.RecordBatch.from_pydict(rows)


def _stats(metadata: pq.FileMetaData) -> dict:
    """Delta's per-file statistics from the Parquet footer: record count, min/max, null counts of
    every flat column (what delta readers prune files with)."""
    minimum, maximum, nulls = {}, {}, {}
    flat = {field.name for field in metadata.schema.to_arrow_schema()
            if not pa.types.is_nested(field.type) and not pa.types.is_binary(field.type)}
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for leaf in range(row_group.num_columns):  # leaves: a map or list column has several
            column = row_group.column(leaf)
            name = column.path_in_schema
            statistics = column.statistics
            if name not in flat or statistics is None:
                continue
            nulls[name] = nulls.get(name, 0) + (statistics.null_count or 0)
            if statistics.has_min_max:
                low, high = _json(statistics.min), _json(statistics.max)
                minimum[name] = low if name not in minimum else min(minimum[name], low)
                maximum[name] = high if name not in maximum else max(maximum[name], high)
    return {"numRecords": metadata.num_rows, "minValues": minimum, "maxValues": maximum,
            "nullCount": nulls}


def _json(value):
    if isinstance(value, datetime.datetime):
        value = value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)
        return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, (datetime.date,)):
        return value.isoformat()
    return value


def _filesystem(lake: str) -> tuple[pafs.FileSystem, str]:
    if "://" in lake:
        return pafs.FileSystem.from_uri(lake)
    import os
    return pafs.LocalFileSystem(), os.path.abspath(lake)


# -- driver --------------------------------------------------------------------------------------

def commit(lake: str, table: Table, files: list[dict], captures: set[str] | None, run_id: str) -> int:
    """One Delta transaction for `table`: this run's files in, the replaced captures' files out
    (every file when `captures` is None: a rebuild). Returns the table version written."""
    from deltalake import CommitProperties, DeltaTable, Schema
    from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions

    uri = table_uri(_absolute(lake), table)
    now = int(time.time() * 1000)
    adds = [AddAction(f["path"], f["size"], {"date": f["date"]}, now, True, f["stats"]) for f in files]
    properties = CommitProperties(custom_metadata={
        "run_id": run_id, "captures": "all" if captures is None else len(captures)})
    schema = table.arrow().remove_metadata()
    if not DeltaTable.is_deltatable(uri):
        create_table_with_add_actions(uri, Schema.from_arrow(schema), adds, mode="append",
                                      partition_by=["date"], commit_properties=properties)
        return DeltaTable(uri).version()
    existing = DeltaTable(uri)
    key = replace_key(table)
    removes = []
    for action in pa.table(existing.get_add_actions(flatten=True)).to_pylist():
        low, high = action.get(f"min.{key}"), action.get(f"max.{key}")
        if captures is None or (low is not None and low == high and low in captures):
            removes.append(RemoveAction(action["path"], True, now, action["size_bytes"],
                                        {"date": str(action.get("partition.date"))}))
    existing.create_write_transaction(removes + adds, mode="append", schema=schema,
                                      partition_by=["date"], commit_properties=properties)
    return DeltaTable(uri).version()


def commit_all(lake: str, files: list[dict], captures: set[str], run_id: str) -> dict[str, int]:
    """commit() for every raw table. delta-rs has no multi-table transaction: if a commit fails,
    the tables this run already committed are restored to their versions before the run, so a
    failed run leaves no partial result (tables this run created stay, empty of nothing new)."""
    from deltalake import DeltaTable
    versions: dict[str, int] = {}
    before: dict[str, int] = {}
    try:
        for table in RAW_TABLES:
            uri = table_uri(_absolute(lake), table)
            if DeltaTable.is_deltatable(uri):
                before[table.name] = DeltaTable(uri).version()
            mine = [f for f in files if f["table"] == table.name]
            versions[table.name] = commit(lake, table, mine, captures, run_id)
    except Exception:
        for name in versions:
            if name in before:
                DeltaTable(table_uri(_absolute(lake), TABLES[name])).restore(before[name])
        raise
    return versions


def _absolute(lake: str) -> str:
    import os
    return lake if "://" in lake else os.path.abspath(lake)


# -- engine choice and the delta-spark path --------------------------------------------------------

ENGINES = ("delta-rs", "delta-spark")


class EngineError(Exception):
    pass


def delta_spark_loaded(spark) -> bool:
    try:
        spark._jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")
        return True
    except Exception:  # py4j wraps ClassNotFoundException
        return False


def choose_engine(configured: str, loaded: bool) -> str:
    if configured == "auto":
        return "delta-spark" if loaded else "delta-rs"
    if configured == "delta-spark" and not loaded:
        raise EngineError("lake.engine is delta-spark but the Delta jars are not on Spark's classpath "
                          "(add io.delta:delta-spark to spark.jars or the cluster image), or use "
                          "engine = \"delta-rs\"")
    return configured


def untag_rows(tagged, table: Table):
    """The (table, IPC batch) rows of one table as a DataFrame with the table's schema."""
    return tagged.where(tagged.table == table.name).mapInArrow(
        functools.partial(untag_task, table_name=table.name), table.spark())


def untag_task(batches: Iterator[pa.RecordBatch], table_name: str) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for blob in batch.column("batch").to_pylist():
            yield untag(blob)


def write_with_delta_spark(tagged, lake: str, table: Table, captures: set[str]) -> int:
    from delta.tables import DeltaTable as SparkDeltaTable
    uri = table_uri(lake, table)
    quoted = ", ".join("'" + c.replace("'", "''") + "'" for c in sorted(captures))
    (untag_rows(tagged, table).write.format("delta").mode("overwrite").partitionBy("date")
     .option("replaceWhere", f"{replace_key(table)} IN ({quoted})").save(uri))
    spark = tagged.sparkSession
    return SparkDeltaTable.forPath(spark, uri).history(1).collect()[0]["version"]


def run_captures(spark, lake: str, run_id: str) -> list[dict]:
    """This run's rows of the captures table (one per input file): read from the active files
    directly, without a Spark job, when delta-rs wrote them."""
    if delta_spark_loaded(spark):
        frame = read_table(spark, lake, CAPTURES)
        return [row.asDict() for row in frame.where(frame.run_id == run_id).collect()]
    from deltalake import DeltaTable
    table = DeltaTable(table_uri(_absolute(lake), CAPTURES)).to_pyarrow_table(
        columns=["run_id", "path", "status", "error"])
    return [row for row in table.to_pylist() if row["run_id"] == run_id]


def read_table(spark, lake: str, table: Table | str):
    """A lake table as a Spark DataFrame, whichever engine wrote it: through delta-spark when its
    classes are loaded, else from the active files in the Delta log (delta-rs)."""
    from deltalake import DeltaTable
    table = TABLES[table] if isinstance(table, str) else table
    uri = table_uri(_absolute(lake), table)
    if delta_spark_loaded(spark):
        return spark.read.format("delta").load(uri).select(*table.names)
    files = DeltaTable(uri).file_uris()
    if not files:
        return spark.createDataFrame([], table.spark())
    frame = spark.read.option("basePath", uri).schema(table.spark()).parquet(*files)
    return frame.select(*table.names)
