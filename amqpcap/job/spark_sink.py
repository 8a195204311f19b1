"""The delta-spark engine (Delta jars on Spark's classpath: a cluster, Databricks, a lake on a
filesystem only Hadoop opens): executors write the run's Parquet files into its staging area, then
Spark writes their rows into each table, replacing the rows of the run's captures (`replaceWhere`)
and the provisional rows its resumed connections supersede, in one commit per table. The run log
(amqpcap.lake.runlog) makes the run all or nothing for readers, as with delta-rs: the same manifest,
the same runs row, each commit tagged with the run id (Spark's `userMetadata`); a commit that loses
a race with a concurrent run is made again on the table as it now is. Rows go from the staged files
to the table on the executors; the driver sees only metadata.

The job chooses its sink here (amqpcap.lake.sinks has the Sink protocol and the embedded engine).
"auto" is delta-rs: committing the files the executors wrote takes it a fraction of a second a
table, where Spark reads and writes every row again (README: Engines, measured)."""

from __future__ import annotations

import random
import time

from amqpcap.lake.paths import absolute, hadoop_uri, table_uri
from amqpcap.lake.runlog import ATTEMPTS, commit_run, committed_version, manifest_of, run_tag
from amqpcap.lake.sinks import DeltaRsSink, EngineError, Sink
from amqpcap.lake.spark_read import delta_spark_loaded, read_files
from amqpcap.tables.registry import Table

ENGINE = "delta-spark"


def choose_sink(engine: str, spark, lake: str, staging: str) -> Sink:
    if engine == ENGINE:
        require_delta(spark)
        return DeltaSparkSink(spark, lake, staging)
    return DeltaRsSink(lake)


def require_delta(spark) -> None:
    if not delta_spark_loaded(spark):
        raise EngineError("lake.engine is delta-spark but the Delta jars are not on Spark's classpath (fetch them "
                          "here: python -m amqpcap.job.jars; on spark-submit pass them with --jars or --packages "
                          "io.delta:delta-spark_4.2_2.13), or use engine = \"delta-rs\"")


def appliers(spark) -> dict:
    """The run log's table commits this session can make, by engine (amqpcap.lake.runlog.repair)."""
    return {ENGINE: SparkTableCommit(spark)} if delta_spark_loaded(spark) else {}


class DeltaSparkSink:
    name = ENGINE

    def __init__(self, spark, lake: str, staging: str) -> None:
        self.spark = spark
        self.lake = absolute(lake)
        self.root = f"{staging}/tables"

    def table_root(self) -> str:
        return self.root

    def commit(self, files, replaced, run_id, tables, kind: str = "run", captures=(), summary=None,
               started=None, superseded=()):
        manifest = manifest_of(run_id, kind, files, replaced, tables, captures, summary, started, superseded,
                               engine=ENGINE, root=self.root)
        return commit_run(self.lake, manifest, SparkTableCommit(self.spark))


class SparkTableCommit:
    """One table's commit for a run, by Spark (amqpcap.lake.runlog.apply_table's arguments): the
    staged files' rows in (under `root`, the manifest's), the replaced captures' rows and the
    superseded provisional rows out."""

    # Tables committed at once (amqpcap.lake.runlog.commit_run): each commit is a few small Spark
    # jobs and Delta log work on the driver, partly waiting; 4 at once took a rerun of the samples'
    # 16 tables from 38.8 to 31.8 s here (2 cores).
    concurrent_tables = 4

    def __init__(self, spark) -> None:
        self.spark = spark

    def __call__(self, lake: str, table: Table, files, replaced, run_id: str, since_ms: int, superseded=(), *,
                 root: str) -> int:
        from py4j.protocol import Py4JJavaError
        uri = table_uri(lake, table)
        superseded = superseded if "provisional" in table.names else ()
        condition = replace_condition(table, replaced, superseded)
        for attempt in range(ATTEMPTS):
            done = committed_version(uri, run_id, since_ms)
            if done is not None:
                return done
            frame = read_files(self.spark, root, table, files).select(*table.names)
            writer = (frame.write.format("delta").partitionBy("date").option("userMetadata", run_tag(run_id))
                      .mode("append" if condition == "" else "overwrite"))
            if condition:
                writer = writer.option("replaceWhere", condition)
            try:
                writer.save(hadoop_uri(uri))
            except Py4JJavaError as error:  # a concurrent run's commit won: write again on its result
                if attempt == ATTEMPTS - 1 or not _concurrent(error):
                    raise
                time.sleep(random.uniform(0.05, 0.3) * (attempt + 1))
                continue
            done = committed_version(uri, run_id, since_ms)
            # none: Delta skipped a commit that changed nothing (no rows in, none replaced), and
            # doing the same again would change nothing either
            return done if done is not None else _latest(uri)
        raise RuntimeError(f"{table.name}: could not commit run {run_id}")


def _latest(uri: str) -> int:
    from deltalake import DeltaTable
    return DeltaTable(uri).version()


def _concurrent(error) -> bool:
    text = str(error.java_exception)
    return "Concurrent" in text or "ProtocolChanged" in text or "MetadataChanged" in text or "already exists" in text


def replace_condition(table: Table, replaced: set[str] | None, superseded) -> str | None:
    """The rows a run's commit replaces, in SQL: None, all of them (a rebuild); "" none (an append)."""
    if replaced is None:
        return None
    def quoted(text: str) -> str:
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    parts = []
    if replaced:
        parts.append(f"{table.replace_key} IN ({', '.join(quoted(c) for c in sorted(replaced))})")
    columns = [c for c in ("connection", "publisher_connection", "consumer_connection") if c in table.names]
    pairs = [f"({column} = {quoted(c)} AND source = {quoted(s)})" for c, s in superseded for column in columns]
    if pairs:
        parts.append(f"(provisional AND ({' OR '.join(pairs)}))")
    return " OR ".join(parts)
