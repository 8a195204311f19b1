"""Reading the lake's tables back, whichever engine wrote them."""

from __future__ import annotations

from amqp_decode.tables import TABLES, Table
from pipelines.paths import table_uri
from pipelines.sinks import delta_spark_loaded


def read_table(spark, lake: str, table: Table | str, version: int | None = None):
    """A lake table as a Spark DataFrame, as of the lake's last complete run (pipelines.runlog: a run
    still committing, or interrupted, is not seen): through delta-spark when its classes are loaded,
    else from that version's files in the Delta log (delta-rs)."""
    from pipelines.runlog import snapshot, table_files
    from pipelines.spark_types import struct_type
    table = TABLES[table] if isinstance(table, str) else table
    uri = table_uri(lake, table)
    if version is None:
        version = snapshot(lake).get(table.name)
    if version is None:
        return spark.createDataFrame([], struct_type(table))
    if delta_spark_loaded(spark):
        return spark.read.format("delta").option("versionAsOf", version).load(uri).select(*table.names)
    files = table_files(lake, table, version)
    if not files:
        return spark.createDataFrame([], struct_type(table))
    frame = spark.read.option("basePath", uri).schema(struct_type(table)).parquet(*files)
    return frame.select(*table.names)


def read_files(spark, root: str, table: Table, files: list[dict]):
    """The rows of some of a table's files (this run's, before they are committed)."""
    from pipelines.spark_types import struct_type
    folder = f"{root}/{table.name}"
    paths = [f"{folder}/{f['path']}" for f in files if f["table"] == table.name]
    if not paths:
        return spark.createDataFrame([], struct_type(table))
    return spark.read.option("basePath", folder).schema(struct_type(table)).parquet(*paths)
