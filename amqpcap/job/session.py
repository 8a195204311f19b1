"""The SparkSession the jobs run in: local by default, any cluster when told; quiet unless asked."""

from __future__ import annotations

import os
import re
import shlex
import sys
import threading
from importlib import resources

from amqpcap.job import class_archive
from amqpcap.process import SINGLE_BLAS_THREAD, storage_environment
from amqpcap.settings import Settings

QUIET_LOG4J = resources.files("amqpcap.job") / "log4j2.properties"


def build_session(settings: Settings, master: str | None = None, verbose: bool = False,
                  sql_on_demand: bool = False):
    """Python workers must run this interpreter, or they would not find the project's packages
    (PySpark reads PYSPARK_PYTHON when it starts workers; spark-submit reads the conf).
    `sql_on_demand`: an OnDemandSession, for a job that may need only the SparkContext."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if (master or settings.spark.master).startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, no hostname lookups
    if not _submitted():
        # the JVM reads these when it starts: before the gateway launches it
        options = [] if verbose else [f"-Dlog4j2.configurationFile={QUIET_LOG4J}"]
        dump = os.environ.get("AMQPCAP_CLASS_ARCHIVE_DUMP")  # amqpcap.job.class_archive making one
        options.append(f"-XX:ArchiveClassesAtExit={dump}" if dump else class_archive.java_options())
        options.extend(driver_java_options(master or settings.spark.master,
                                           settings.spark.conf.get("spark.driver.extraJavaOptions", "")))
        if any(options):
            joined = shlex.quote(" ".join(filter(None, options)))  # PySpark splits it as a shell would
            os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-java-options {joined} pyspark-shell"
    builder = (SparkSession.builder.appName(settings.spark.app_name)
               .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(settings.spark.arrow_batch_rows))
               .config("spark.ui.showConsoleProgress", "true" if verbose else "false"))
    if master or not _submitted():
        builder = builder.master(master or settings.spark.master)
    for name, value in SINGLE_BLAS_THREAD.items():  # Python workers' environment, on any cluster
        builder = builder.config(f"spark.executorEnv.{name}", os.environ.get(name, value))
    for name, value in storage_environment(settings.storage).items():  # the store's endpoint, not its keys
        builder = builder.config(f"spark.executorEnv.{name}", value)
    if not _submitted():  # workers import an installed PySpark compiled, not from its zip
        builder = builder.config("spark.python.daemon.module", "amqpcap.job.spark_daemon")
    ours = {}
    if not _submitted():  # (spark-submit's JVM has its classpath already: --jars, --packages)
        ours.update(lake_jars())
    ours.update(s3a_conf(settings.storage.s3_endpoint or os.environ.get("AWS_ENDPOINT_URL", "")))
    for key, value in merge_conf(ours, settings.spark.conf).items():
        builder = builder.config(key, value)
    fresh = not _submitted() and SparkSession.getActiveSession() is None
    context = _start_quiet_jvm(builder) if fresh and not verbose else None
    if fresh and sql_on_demand:
        spark = OnDemandSession(builder, context or SparkContext(conf=_conf(builder)))
    else:
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN" if verbose else "ERROR")
    return spark


# The embedded (local) JVM is driver and executors at once, and the nightly job passes it no rows:
# ~35 MB of live heap whatever the night's size. G1 (the JVM's default) still commits 1/64 of the
# machine's memory up front (389 MB here) and touches more of it the longer a run lasts (JVM peak
# 339 MB at 0.5 GB, 423 MB at 10 GB); the serial collector with a small initial heap grows the heap
# only as the live data needs (299 / 312 MB), with no slower a run. Its JIT stops at the quick
# compiler (C1): the optimising one (C2) spent ~1.9 s of CPU per run on code that only schedules
# tasks and passes their small results, taken from the Python tasks on a small machine (perf: 11%
# of all CPU at 0.5 GB; the run 7.8-8.8 -> 7.3-7.5 s; JVM peak 273-280 MB from 0.5 to 10 GB).
# Not for a cluster's driver.
LOCAL_JVM_OPTIONS = ("-XX:+UseSerialGC", "-Xms32m", "-XX:TieredStopAtLevel=1")
_COLLECTOR = re.compile(r"-XX:\+Use\w*GC\b")


def driver_java_options(master: str, extra: str) -> list[str]:
    """The driver JVM's options beyond the log and class-archive ones: LOCAL_JVM_OPTIONS for a
    local master, then the user's spark.driver.extraJavaOptions (--driver-java-options would
    otherwise replace them), which win: a collector they choose replaces ours (the JVM refuses
    two), and a later -Xms overrides an earlier one."""
    ours = list(LOCAL_JVM_OPTIONS) if master.startswith("local") else []
    if _COLLECTOR.search(extra):
        ours = [option for option in ours if not _COLLECTOR.fullmatch(option)]
    return ours + ([extra.strip()] if extra.strip() else [])


class OnDemandSession:
    """A SparkContext at once, and the SparkSession over it only when something asks for one. The
    nightly job's stages are plain RDD tasks, and with the delta-rs sink it never needs SQL; making
    the JVM's SQL session anyway took ~2 s of start-up (class loading), and slowed the first tasks
    that start beside it. Anything but `sparkContext` and `stop` is the session's."""

    def __init__(self, builder, context) -> None:
        self._builder = builder
        self._session = None
        self.sparkContext = context

    @property
    def session(self):
        if self._session is None:
            self._session = self._builder.getOrCreate()  # over the running SparkContext
        return self._session

    def __getattr__(self, name: str):
        return getattr(self.session, name)

    def stop(self) -> None:
        context = self.sparkContext
        # PySpark's accumulator server stops only when its connection's handler next wakes from a
        # one-second poll: SparkContext.stop waited ~0.6 s for it at the end of every run. It is
        # taken from the context, which then stops everything else, and shut down beside, in a
        # thread of its own that is not waited for (it closes the socket within a second).
        server = getattr(context, "_accumulatorServer", None)
        if server is not None:
            context._accumulatorServer = None
        try:
            (self._session if self._session is not None else context).stop()
        finally:
            if server is not None:
                threading.Thread(target=server.shutdown, name="accumulator-server-stop", daemon=True).start()


# Lines the JVM itself prints at every start (not through log4j): noise for a user.
JVM_NOISE = ("WARNING: Using incubator modules", "Setting default log level to",
             "To adjust logging level use sc.setLogLevel")


def _start_quiet_jvm(builder):
    """Launch the JVM with its stderr through a filter that drops JVM_NOISE (everything else, a
    real error, still reaches the console), then create the SparkContext on it (returned)."""
    import subprocess

    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway
    conf = _conf(builder)
    # PySpark's py4j converters import pandas on the first call into the JVM (through
    # pyspark.testing.utils, ~0.5 s): import it while the JVM starts, not after.
    threading.Thread(target=_import_quietly, args=("pyspark.testing.utils",), name="warm-imports",
                     daemon=True).start()
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    stream = gateway.proc.stderr

    def forward() -> None:
        for line in iter(stream.readline, b""):
            if not line.decode(errors="replace").startswith(JVM_NOISE):
                sys.stderr.buffer.write(line)
                sys.stderr.flush()
    threading.Thread(target=forward, name="jvm-stderr", daemon=True).start()
    return SparkContext(conf=conf, gateway=gateway)


def _import_quietly(module: str) -> None:
    """A head start only: a module that fails here fails again, loudly, where it is needed."""
    import importlib
    try:
        importlib.import_module(module)
    except Exception:
        pass


def _conf(builder):
    from pyspark import SparkConf
    conf = SparkConf(loadDefaults=True)
    for key, value in builder._options.items():
        conf.set(key, value)
    return conf


def lake_jars() -> dict[str, str]:
    """Spark conf loading the jars fetched at set-up (amqpcap.job.jars), when they were: Delta with
    its SQL extension and catalog (`spark.read.format("delta")`, ``delta.`path` `` tables, DESCRIBE
    HISTORY, VERSION AS OF), and S3A (`s3a://`). Without them, nothing (delta-rs needs none of it;
    the delta-spark engine then says what is missing)."""
    from amqpcap.job.jars import installed
    jars = installed()
    if not jars:
        return {}
    return {"spark.jars": ",".join(jars),
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}


LIST_CONF = ("spark.jars", "spark.sql.extensions")  # comma-separated: theirs and ours both count


def merge_conf(ours: dict[str, str], theirs: dict[str, str]) -> dict[str, str]:
    """The user's Spark conf over ours; for a list (jars, SQL extensions), theirs then ours."""
    merged = {**ours, **theirs}
    for key in LIST_CONF:
        if ours.get(key) and theirs.get(key):
            items = [i.strip() for i in f"{theirs[key]},{ours[key]}".split(",") if i.strip()]
            merged[key] = ",".join(dict.fromkeys(items))
    return merged


def s3a_conf(endpoint: str) -> dict[str, str]:
    """Hadoop's S3A connector pointed at an S3-compatible store (storage.s3_endpoint, or
    AWS_ENDPOINT_URL): path-style requests, TLS as the URL says. Credentials are the AWS chain's
    (S3A's default providers read the same environment and profiles), never Spark conf."""
    if not endpoint:
        return {}
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return {"spark.hadoop.fs.s3a.endpoint": endpoint, "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": str(endpoint.startswith("https://")).lower(),
            "spark.hadoop.fs.s3a.endpoint.region": region}


def _submitted() -> bool:
    """Started by spark-submit, whose --master must win: the JVM launched this Python driver and
    told it where its gateway is."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def train_class_archive(partial: str) -> None:
    """The small representative session whose JVM dumps the classes it loaded into `partial` as
    it exits (amqpcap.job.class_archive.build runs it in a child process)."""
    import tempfile

    os.environ["AMQPCAP_CLASS_ARCHIVE_DUMP"] = partial
    spark = build_session(Settings(), "local[2]")
    spark.sparkContext.parallelize(range(4), 2).mapPartitions(lambda rows: [sum(rows)]).collect()
    with tempfile.TemporaryDirectory() as folder:
        frame = spark.createDataFrame([(1, "a"), (2, "b")], "n int, s string")
        frame.write.parquet(f"{folder}/t")
        spark.read.parquet(f"{folder}/t").groupBy("s").count().collect()
    gateway = spark.sparkContext._gateway
    spark.stop()
    process = getattr(gateway, "proc", None)  # the JVM: it dumps the archive as it exits
    if process is not None:
        process.stdin.close()  # Spark's gateway exits when its stdin ends
        process.wait(timeout=300)


if __name__ == "__main__" and sys.argv[1:2] == ["--train-class-archive"]:
    train_class_archive(sys.argv[2])
