"""The SparkSession the job runs in: local by default, any cluster when told."""

from __future__ import annotations

import os
import sys

from pipelines.config import Config


def build_session(config: Config, master: str | None = None):
    """Python workers must run this interpreter, or they would not find the project's packages
    (PySpark reads PYSPARK_PYTHON when it starts workers; spark-submit reads the conf)."""
    from pyspark.sql import SparkSession
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if (master or config.spark.master).startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, no hostname lookups
    builder = (SparkSession.builder.appName(config.spark.app_name)
               .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(config.spark.arrow_batch_rows)))
    if master or not _submitted():
        builder = builder.master(master or config.spark.master)
    for key, value in config.spark.conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _submitted() -> bool:
    """Started by spark-submit, whose --master must win: the JVM launched this Python driver and
    told it where its gateway is."""
    return "PYSPARK_GATEWAY_PORT" in os.environ
