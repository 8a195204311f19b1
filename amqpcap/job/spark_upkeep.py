"""Table upkeep by delta-spark (lake.engine = "delta-spark"): OPTIMIZE and VACUUM, and the run log's
repairs by Spark commits. amqpcap.lake.maintain calls it as it calls deltalake's."""

from __future__ import annotations

from amqpcap.job.spark_sink import appliers, require_delta
from amqpcap.lake.paths import hadoop_uri


class SparkUpkeep:
    name = "delta-spark"

    def __init__(self, spark) -> None:
        require_delta(spark)
        self.spark = spark
        self.appliers = appliers(spark)
        # the retention is the operator's (maintain.retention_hours), as with deltalake
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        # VACUUM lists a table's folders in as many tasks as this says, 10,000 by default: minutes
        # of empty tasks per table on a small cluster (141 s for a table of 6 files here)
        parallelism = spark.sparkContext.defaultParallelism
        spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.parallelism", str(max(8, 4 * parallelism)))

    def compact(self, uri: str, target: int) -> tuple[int, int]:
        from delta.tables import DeltaTable
        self.spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(target))
        metrics = DeltaTable.forPath(self.spark, hadoop_uri(uri)).optimize().executeCompaction()
        row = metrics.select("metrics.numFilesRemoved", "metrics.numFilesAdded").first()
        return int(row[0] or 0), int(row[1] or 0)

    def vacuum(self, uri: str, hours: int, dry_run: bool) -> int:
        path = hadoop_uri(uri).replace("`", "``")
        listed = self.spark.sql(f"VACUUM delta.`{path}` RETAIN {int(hours)} HOURS" + (" DRY RUN" if dry_run else ""))
        return listed.count() if dry_run else _deleted(self.spark, uri)


def _deleted(spark, uri: str) -> int:
    """Files the vacuum just deleted (its VACUUM END commit's metrics)."""
    from delta.tables import DeltaTable
    history = DeltaTable.forPath(spark, hadoop_uri(uri)).history(2).select("operation", "operationMetrics").collect()
    for row in history:
        if row["operation"] == "VACUUM END":
            return int((row["operationMetrics"] or {}).get("numDeletedFiles", 0))
    return 0
