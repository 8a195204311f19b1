"""Where things are in a lake: one home for its paths (the run log, the sinks, upkeep and the
readers all ask here). A lake is a local folder or any URI pyarrow and delta-rs open.

One bucket, two spellings: Python (pyarrow, delta-rs) names S3 `s3://`, Hadoop (Spark's readers and
delta-spark) `s3a://`. A lake given either way is kept as `s3://` (`absolute`), and handed to Spark
as `s3a://` (`hadoop_uri`)."""

from __future__ import annotations

import os

from amqpcap.tables.registry import Table

HADOOP_S3 = ("s3a://", "s3n://")


def absolute(lake: str) -> str:
    """A local lake as an absolute path (file:// URIs too); S3 as s3://; any other URI as it is."""
    if lake.startswith(HADOOP_S3):
        return "s3://" + lake.split("://", 1)[1]
    return lake if "://" in lake and not lake.startswith("file://") else os.path.abspath(lake.removeprefix("file://"))


def hadoop_uri(uri: str) -> str:
    """The same place as Spark's Hadoop filesystems name it (S3 through the S3A connector)."""
    return "s3a://" + uri[len("s3://"):] if uri.startswith("s3://") else uri


def table_uri(lake: str, table: Table | str) -> str:
    return f"{absolute(lake).rstrip('/')}/{table if isinstance(table, str) else table.name}"


def pending_dir(lake: str) -> str:
    """Where the run log keeps the manifests of runs still committing (amqpcap.lake.runlog)."""
    return f"{absolute(lake)}/_amqpcap/pending"


def staging_in(lake: str, run_id: str) -> str:
    """A run's staging area inside the lake (a cluster's executors all reach it)."""
    return f"{absolute(lake)}/_staging/{run_id}"
