"""Reading the lake's tables into a Spark session, whichever engine wrote them. The session is the
caller's: nothing here imports pyspark (the schema is each table's Spark DDL)."""

from __future__ import annotations

from amqpcap.lake.paths import table_uri
from amqpcap.lake.tablefiles import TableFile
from amqpcap.tables.registry import TABLES, Table


def delta_spark_loaded(spark) -> bool:
    """Whether the session has delta-spark's classes (the Delta jars on its classpath)."""
    try:
        spark.sparkContext._jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")
        return True
    except Exception:  # py4j wraps ClassNotFoundException
        return False


def read_table(spark, lake: str, table: Table | str, version: int | None = None):
    """A lake table as a Spark DataFrame, as of the lake's last complete run (amqpcap.lake.runlog: a run
    still committing, or interrupted, is not seen): through delta-spark when its classes are loaded,
    else from that version's files in the Delta log (delta-rs)."""
    from amqpcap.lake.runlog import snapshot, table_files
    table = TABLES[table] if isinstance(table, str) else table
    uri = table_uri(lake, table)
    if version is None:
        version = snapshot(lake).get(table.name)
    if version is None:
        return empty(spark, table)
    if delta_spark_loaded(spark):
        return spark.read.format("delta").option("versionAsOf", version).load(uri).select(*table.names)
    files = table_files(lake, table, version)
    if not files:
        return empty(spark, table)
    frame = spark.read.option("basePath", uri).schema(table.ddl(comments=True)).parquet(*files)
    return frame.select(*table.names)


def read_files(spark, root: str, table: Table, files: list[TableFile]):
    """The rows of some of a table's files (this run's, before they are committed)."""
    folder = f"{root}/{table.name}"
    paths = [f"{folder}/{f.path}" for f in files if f.table == table.name]
    if not paths:
        return empty(spark, table)
    return spark.read.option("basePath", folder).schema(table.ddl(comments=True)).parquet(*paths)


def empty(spark, table: Table):
    return spark.createDataFrame([], table.ddl(comments=True))
