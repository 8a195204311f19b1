"""The SparkSession the jobs run in: local by default, any cluster when told; quiet unless asked."""

from __future__ import annotations

import os
import sys
from importlib import resources

from amqp_decode.settings import Settings
from pipelines import class_archive

QUIET_LOG4J = resources.files("pipelines") / "log4j2.properties"


def build_session(settings: Settings, master: str | None = None, verbose: bool = False):
    """Python workers must run this interpreter, or they would not find the project's packages
    (PySpark reads PYSPARK_PYTHON when it starts workers; spark-submit reads the conf)."""
    from pyspark.sql import SparkSession
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if (master or settings.spark.master).startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, no hostname lookups
    if not _submitted():
        # the JVM reads these when it starts: before the gateway launches it
        options = [] if verbose else [f"-Dlog4j2.configurationFile={QUIET_LOG4J}"]
        dump = os.environ.get("AMQPCAP_CLASS_ARCHIVE_DUMP")  # pipelines.class_archive making one
        options.append(f"-XX:ArchiveClassesAtExit={dump}" if dump else class_archive.java_options())
        if any(options):
            os.environ["PYSPARK_SUBMIT_ARGS"] = f'--driver-java-options "{" ".join(filter(None, options))}" pyspark-shell'
    builder = (SparkSession.builder.appName(settings.spark.app_name)
               .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(settings.spark.arrow_batch_rows))
               .config("spark.ui.showConsoleProgress", "true" if verbose else "false"))
    if master or not _submitted():
        builder = builder.master(master or settings.spark.master)
    for key, value in settings.spark.conf.items():
        builder = builder.config(key, value)
    if not verbose and not _submitted() and SparkSession.getActiveSession() is None:
        _start_quiet_jvm(builder)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN" if verbose else "ERROR")
    return spark


# Lines the JVM itself prints at every start (not through log4j): noise for a user.
JVM_NOISE = ("WARNING: Using incubator modules", "Setting default log level to",
             "To adjust logging level use sc.setLogLevel")


def _start_quiet_jvm(builder) -> None:
    """Launch the JVM with its stderr through a filter that drops JVM_NOISE (everything else, a
    real error, still reaches the console), then create the SparkContext on it."""
    import subprocess
    import threading

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    conf = SparkConf(loadDefaults=True)
    for key, value in builder._options.items():
        conf.set(key, value)
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    stream = gateway.proc.stderr

    def forward() -> None:
        for line in iter(stream.readline, b""):
            if not line.decode(errors="replace").startswith(JVM_NOISE):
                sys.stderr.buffer.write(line)
                sys.stderr.flush()
    threading.Thread(target=forward, name="jvm-stderr", daemon=True).start()
    SparkContext(conf=conf, gateway=gateway)


def _submitted() -> bool:
    """Started by spark-submit, whose --master must win: the JVM launched this Python driver and
    told it where its gateway is."""
    return "PYSPARK_GATEWAY_PORT" in os.environ
