"""The job's session: a SparkContext at once, the SQL session only when asked for."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from amqpcap.job.session import OnDemandSession, driver_java_options
from amqpcap.job.spark_daemon import installed_package_zips

ROOT = Path(__file__).resolve().parents[2]


class _Builder:
    def __init__(self) -> None:
        self.made: list[_Session] = []

    def getOrCreate(self):
        self.made.append(_Session())
        return self.made[-1]


class _Session:
    stopped = False
    version = "4.x"

    def stop(self) -> None:
        self.stopped = True


class _Context:
    stopped = False

    def stop(self) -> None:
        self.stopped = True


def test_the_session_is_made_on_first_use_and_once():
    builder, context = _Builder(), _Context()
    spark = OnDemandSession(builder, context)
    assert spark.sparkContext is context and builder.made == []
    assert spark.version == "4.x" and spark.version == "4.x"
    assert len(builder.made) == 1
    spark.stop()
    assert builder.made[0].stopped and not context.stopped  # the session stops its own context


def test_stopping_an_unused_session_stops_the_context():
    builder, context = _Builder(), _Context()
    OnDemandSession(builder, context).stop()
    assert context.stopped and builder.made == []


class _AccumulatorServer:
    """Like PySpark's: shutdown() returns only when its handler next wakes (here: when let go)."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.let_go = threading.Event()
        self.thread: str | None = None

    def shutdown(self) -> None:
        self.thread = threading.current_thread().name
        self.asked.set()
        self.let_go.wait(30)


class _ContextWithServer(_Context):
    def __init__(self) -> None:
        self._accumulatorServer = self.server = _AccumulatorServer()
        self.server_at_stop = "unset"

    def stop(self) -> None:
        self.server_at_stop = self._accumulatorServer  # what PySpark's stop would wait for
        self.stopped = True


@pytest.mark.parametrize("with_sql", [False, True])
def test_stopping_does_not_wait_for_the_accumulator_server(with_sql):
    builder, context = _Builder(), _ContextWithServer()
    spark = OnDemandSession(builder, context)
    if with_sql:
        assert spark.version == "4.x"
    spark.stop()  # returns although the server's shutdown has not
    if with_sql:  # the session stops its context (PySpark's does), with the server gone from it
        assert builder.made[0].stopped and context._accumulatorServer is None
    else:
        assert context.stopped and context.server_at_stop is None
    assert context.server.asked.wait(10) and context.server.thread == "accumulator-server-stop"
    context.server.let_go.set()


@pytest.mark.slow
def test_a_real_job_needs_no_sql_session_until_asked(tmp_path):
    """In a fresh process (this one has the tests' shared session): RDD work runs on the context
    alone, with no SQL session in the JVM; asking for SQL then makes it over the same context."""
    script = textwrap.dedent("""
        from amqpcap.settings import Settings
        from amqpcap.job.session import build_session
        spark = build_session(Settings(), "local[2]", sql_on_demand=True)
        context = spark.sparkContext
        assert context.parallelize(range(10), 2).map(lambda x: x * x).sum() == 285
        import pyspark
        def origin(_):
            import pyspark
            return pyspark.__file__
        # the workers import the installed PySpark (compiled once), not the zip Spark puts first
        assert set(context.parallelize(range(2), 2).map(origin).collect()) == {pyspark.__file__}
        sessions = context._jvm.org.apache.spark.sql.SparkSession
        assert not sessions.getDefaultSession().isDefined()
        assert spark.createDataFrame([(1, "a")], "n int, s string").count() == 1
        assert sessions.getDefaultSession().isDefined() and spark.sparkContext is context
        server = context._accumulatorServer
        spark.stop()
        # the accumulator server, shut down beside the stop, closes its socket on its own
        import threading
        [stopping] = [t for t in threading.enumerate() if t.name == "accumulator-server-stop"]
        stopping.join(10)
        assert not stopping.is_alive() and server.server_shutdown and server.socket.fileno() == -1
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def test_only_zips_inside_an_installed_pyspark_are_dropped(tmp_path):
    package = tmp_path / "site" / "pyspark"
    (package / "python" / "lib").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    inside = str(package / "python" / "lib" / "pyspark.zip")
    py4j = str(package / "python" / "lib" / "py4j-0.10.9.9-src.zip")
    cluster = str(tmp_path / "opt" / "spark" / "python" / "lib" / "pyspark.zip")  # no package beside it
    path = [inside, py4j, cluster, str(tmp_path / "site"), "/usr/lib/python311.zip"]
    assert installed_package_zips(path) == [inside, py4j]


def test_a_local_jvm_runs_the_serial_collector_and_the_quick_jit_unless_the_user_chooses():
    ours = ["-XX:+UseSerialGC", "-Xms32m", "-XX:TieredStopAtLevel=1"]
    assert driver_java_options("local[2]", "") == ours
    # the user's options come last (a later -Xms or JIT level wins) and their collector replaces ours
    assert driver_java_options("local[*]", " -Xms1g ") == [*ours, "-Xms1g"]
    assert driver_java_options("local", "-XX:+UseG1GC -XX:TieredStopAtLevel=4") == [
        "-Xms32m", "-XX:TieredStopAtLevel=1", "-XX:+UseG1GC -XX:TieredStopAtLevel=4"]
    assert driver_java_options("spark://host:7077", "") == []  # a cluster's driver keeps the JVM's choice
    assert driver_java_options("yarn", "-Dx=1") == ["-Dx=1"]


@pytest.mark.slow
def test_the_local_jvm_gets_our_options_and_the_users(tmp_path):
    """In a fresh process: the JVM of a local session runs the serial collector and the quick JIT, and a user's
    spark.driver.extraJavaOptions (with a space inside a quoted value) reach it too."""
    script = textwrap.dedent("""
        from amqpcap.settings import from_data
        from amqpcap.job.session import build_session
        settings = from_data({"spark": {"conf": {
            "spark.driver.extraJavaOptions": "-Damqpcap.probe='two words'"}}})
        spark = build_session(settings, "local[1]")
        jvm = spark.sparkContext._jvm
        beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
        flags = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
        print(sorted(bean.getName() for bean in beans), jvm.java.lang.System.getProperty("amqpcap.probe"),
              "-XX:TieredStopAtLevel=1" in list(flags))
        spark.stop()
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "['Copy', 'MarkSweepCompact'] two words True"


_THREADS_AFTER_NUMPY = "import os, numpy; print(len(os.listdir('/proc/self/task')))"


def _threads_after_numpy(env: dict) -> int:
    done = subprocess.run([sys.executable, "-c", _THREADS_AFTER_NUMPY], capture_output=True, text=True,
                          env=env, check=True)
    return int(done.stdout)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_numpy_in_our_processes_starts_no_blas_threads():
    """What SINGLE_BLAS_THREAD buys: numpy (pyarrow imports it in the driver and in every worker)
    imported with it starts no OpenBLAS threads, which otherwise spin on the cores the tasks need."""
    from amqpcap.process import SINGLE_BLAS_THREAD
    env = {key: value for key, value in os.environ.items() if key not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    assert _threads_after_numpy({**env, **SINGLE_BLAS_THREAD}) == 1
    if (os.cpu_count() or 1) > 1:
        assert _threads_after_numpy(env) > 1  # the default: a thread per core


def test_the_sessions_workers_run_with_one_blas_thread(spark):
    wanted = os.environ.get("OPENBLAS_NUM_THREADS", "1")  # the user's choice wins
    seen = spark.sparkContext.parallelize([0], 1).map(lambda _: os.environ.get("OPENBLAS_NUM_THREADS")).collect()
    assert seen == [wanted]


def test_the_command_sets_one_blas_thread_before_anything_imports_numpy():
    code = ("import os, sys; os.environ.pop('OPENBLAS_NUM_THREADS', None); from amqpcap.cli import main; "
            "main(['config']); print(os.environ.get('OPENBLAS_NUM_THREADS'), 'numpy' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stderr.split()[-2:] == ["1", "False"]


def test_the_users_spark_conf_wins_and_lists_keep_both():
    from amqpcap.job.session import merge_conf
    ours = {"spark.jars": "/env/delta.jar,/env/aws.jar", "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "delta"}
    theirs = {"spark.jars": "/opt/theirs.jar", "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
              "spark.sql.catalog.spark_catalog": "theirs"}
    merged = merge_conf(ours, theirs)
    assert merged["spark.jars"] == "/opt/theirs.jar,/env/delta.jar,/env/aws.jar"
    assert merged["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"  # once
    assert merged["spark.sql.catalog.spark_catalog"] == "theirs"
    assert merge_conf({}, theirs) == theirs and merge_conf(ours, {}) == ours


def test_s3a_points_at_the_configured_store_without_credentials(monkeypatch):
    from amqpcap.job.session import s3a_conf
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-copy-me")
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")
    conf = s3a_conf("http://storage:9000")
    assert conf == {"spark.hadoop.fs.s3a.endpoint": "http://storage:9000",
                    "spark.hadoop.fs.s3a.path.style.access": "true",
                    "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
                    "spark.hadoop.fs.s3a.endpoint.region": "eu-west-3"}
    assert s3a_conf("https://s3.example")["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"
    assert s3a_conf("") == {}  # AWS itself: S3A's own defaults
    assert "do-not-copy-me" not in repr(conf)


def test_the_embedded_session_loads_delta_and_s3a_by_default(spark):
    from amqpcap.job.jars import installed
    from amqpcap.lake.spark_read import delta_spark_loaded
    if not installed():
        pytest.skip("the jars were not fetched (python -m amqpcap.job.jars)")
    assert delta_spark_loaded(spark)
    loader = spark.sparkContext._jvm.java.lang.Thread.currentThread().getContextClassLoader()
    spark.sparkContext._jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem", False, loader)
