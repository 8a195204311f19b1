"""The delta-spark engine (Delta jars on Spark's classpath: a cluster, Databricks): executors write
the run's Parquet files into its staging area, then Spark writes them into each table with
`replaceWhere` on the run's captures. The job chooses its sink here (amqpcap.lake.sinks has the
Sink protocol and the embedded delta-rs engine)."""

from __future__ import annotations

from amqpcap.lake.paths import table_uri
from amqpcap.lake.sinks import DeltaRsSink, EngineError, Sink
from amqpcap.lake.spark_read import delta_spark_loaded, read_files
from amqpcap.tables.registry import Table


def choose_sink(engine: str, spark, lake: str, staging: str) -> Sink:
    loaded = delta_spark_loaded(spark)
    if engine == "delta-spark" and not loaded:
        raise EngineError("lake.engine is delta-spark but the Delta jars are not on Spark's classpath (add "
                          "io.delta:delta-spark to spark.jars or the cluster image, or fetch them here: python -m "
                          "amqpcap.job.jars), or use engine = \"delta-rs\"")
    if engine == "delta-spark" or (engine == "auto" and loaded):
        return DeltaSparkSink(spark, lake, staging)
    return DeltaRsSink(lake)


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

        versions = {}
        for table in tables:
            uri = table_uri(self.lake, table)
            frame = read_files(self.spark, self.root, table, files)
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
