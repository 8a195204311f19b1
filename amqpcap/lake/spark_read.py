"""Reading the lake's tables into a Spark session, whichever engine wrote them. The session is the
caller's: nothing here imports pyspark (the schema is each table's Spark DDL). A lake on object
storage is read by Python tasks through pyarrow's filesystems (`read_with_arrow`) unless delta-spark
is there to read it: Spark's own readers would need the store's Hadoop connector on its classpath."""

from __future__ import annotations

from amqpcap.lake.paths import hadoop_uri, table_uri
from amqpcap.lake.tablefiles import TableFile
from amqpcap.tables.registry import TABLES, Table


def delta_spark_loaded(spark) -> bool:
    """Whether the session has delta-spark's classes (the Delta jars on its classpath)."""
    try:
        jvm = spark.sparkContext._jvm  # (spark.jars are in the context class loader, not the caller's)
        jvm.java.lang.Class.forName("io.delta.tables.DeltaTable", False,
                                    jvm.java.lang.Thread.currentThread().getContextClassLoader())
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
        return spark.read.format("delta").option("versionAsOf", version).load(hadoop_uri(uri)).select(*table.names)
    files = table_files(lake, table, version)
    if not files:
        return empty(spark, table)
    if any("://" in f and not f.startswith("file://") for f in files):
        return read_with_arrow(spark, table, files)
    frame = spark.read.option("basePath", uri).schema(table.ddl(comments=True)).parquet(*files)
    return frame.select(*table.names)


def read_with_arrow(spark, table: Table, files: list[str]):
    """A table's `files` (URIs on any filesystem pyarrow opens) as a DataFrame whose partitions
    Python tasks read with pyarrow: the credentials and endpoint are the tasks' own environment's."""
    import functools
    parts = max(1, min(len(files), spark.sparkContext.defaultParallelism))
    listing = spark.createDataFrame([(f,) for f in files], "uri string").repartition(parts)
    return listing.mapInArrow(functools.partial(_read_files, table=table.name), table.ddl(comments=True))


def _read_files(batches, table: str):
    """(A task:) each listed file's rows, with the `date` its partition folder names."""
    import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    from amqpcap.lake.tablefiles import filesystem_of
    declared = TABLES[table]
    schema = declared.arrow().remove_metadata()
    for batch in batches:
        for uri in batch.column(0).to_pylist():
            filesystem, path = filesystem_of(uri)
            data = pq.read_table(path, filesystem=filesystem)
            day = next(part.split("=", 1)[1] for part in path.split("/") if part.startswith("date="))
            date = pa.array([datetime.date.fromisoformat(day)] * data.num_rows, pa.date32())
            data = data.append_column("date", date) if "date" not in data.column_names else data
            yield from data.select(declared.names).cast(schema).to_batches()


def read_files(spark, root: str, table: Table, files: list[TableFile]):
    """The rows of some of a table's files (this run's, before they are committed)."""
    folder = hadoop_uri(f"{root}/{table.name}")
    paths = [f"{folder}/{f.path}" for f in files if f.table == table.name]
    if not paths:
        return empty(spark, table)
    return spark.read.option("basePath", folder).schema(table.ddl(comments=True)).parquet(*paths)


def empty(spark, table: Table):
    return spark.createDataFrame([], table.ddl(comments=True))
