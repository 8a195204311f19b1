"""The nightly job on a real Spark standalone cluster on loopback, shipped the way a user ships it:
a master and two workers (one core, 1 GB each, tests.helpers.cluster), the wheel installed into a
fresh virtualenv outside the checkout (tests.helpers.wheel: built and installed once per session,
shared with tests/packaging/test_wheel.py), that virtualenv packed with `venv-pack` and handed to
the executors with `spark-submit --archives env.tar.gz#env --conf spark.pyspark.python=./env/bin/python`,
the driver on the virtualenv's own interpreter (client mode), the job the installed
`amqpcap/submit.py`, every process run from outside the checkout with no PYTHONPATH. Captures and
lake on S3 (moto's server on loopback, tests.helpers.s3): the executors' credentials are the
workers' environment, as an operator's nodes have them (an instance role), never a Spark conf nor an
amqpcap setting; the endpoint is the job's storage.s3_endpoint, which the session passes to the
executors itself.

Checked: every table but `runs` equals the same samples' local run (conftest's `lake`), capture
names mapped; the executors' Python workers ran `./env/bin/python` (the conf spark-submit was
given, which the session keeps) with amqpcap's compiled modules mapped from the archive each
executor unpacked in its own work dir, never from the checkout: the job's own workers, seen in
/proc while it runs (tests.helpers.cluster.watching_python_workers), where a probe application
would cost ~30 s more here (a second driver, and executors that fetch and unpack the archive
again), and PYTHONVERBOSE in the executors' environment hangs them (Spark reads the Python
daemon's port from its stdout before it drains its stderr: the verbose imports fill that pipe
first); and the secret key is in no object of the buckets, in no output of the job and in no log
of the cluster.

The archive: venv-pack 0.2.0 works on this virtualenv, a `python -m venv` one whose interpreter links
to the base Python. The archive keeps that link, so every node needs that Python at the same path,
as here. It leaves out pyspark and py4j (`--exclude`): Spark puts its own pyspark.zip and py4j's zip
(`<SPARK_HOME>/python/lib`, present in the pip package too) first on every Python worker's path, so
the installed copies would never load. They are also most of the environment: 1.2 GB unpacked and
685 MB packed with them, 700 MB and 230 MB without. Measured on 2 cores: the virtualenv made with
`pip install <wheel>` takes 19-22 s (PySpark from pip's cache). One without PySpark takes 13 s, but
the wheel and delta-spark both pin PySpark, so it would need a resolver report and `--no-deps`. The
shared virtualenv is packed instead of making a second one. venv-pack takes 20 s with PySpark and
10 s without (7-10 s at level 1), while the cluster starts (6 s). Client mode unpacks the archive on
the driver too (~6 s), and each executor unpacks its own (~7-10 s), so the archive's size is on the
job's critical path twice."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

from amqpcap.capture.inputs import expand_inputs
from amqpcap.tables.registry import TABLES
from tests.helpers import s3 as store
from tests.helpers.cluster import (
    LOOPBACK,
    Cluster,
    PythonProcess,
    clean_environment,
    standalone_cluster,
    watching_python_workers,
)
from tests.helpers.lakes import lake_rows
from tests.helpers.samples import ROOT, SAMPLES
from tests.helpers.secrets import encodings
from tests.helpers.wheel import TIMES, installed_venv, sh

pytestmark = pytest.mark.slow

NIGHT = "s3://caps/night/"
KEYS = "s3://caps/keys/"  # (the samples' lake, which the cluster's must equal, was made with them)
LAKE = "s3://lake/amqp"
BUCKETS = ("caps", "lake")
# What the archive leaves out: what Spark's workers bring themselves (their pyspark.zip and py4j's zip)
EXCLUDED = ("lib/*/site-packages/pyspark*", "lib/*/site-packages/py4j*", "share/py4j/*")
# The master's and the workers' JVMs (not the job's): they only schedule, and with the quick JIT alone
# and the serial collector they start on half the CPU (7.5 against 14 CPU-s for the three, measured).
DAEMON_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@dataclass
class Night:
    job: subprocess.CompletedProcess
    cluster: Cluster
    state: dict  # the master's /json after the run
    captures: list[Path]
    workers: dict[int, PythonProcess]  # the executors' Python processes, seen while the job ran
    times: dict[str, float] = field(default_factory=dict)


@pytest.fixture(scope="module")
def server():
    """A running S3 server, the samples' captures under s3://caps/night/: (client, endpoint, captures)."""
    with store.moto_server() as endpoint:
        s3 = store.client(endpoint)
        for bucket in BUCKETS:
            s3.create_bucket(Bucket=bucket)
        captures = [Path(p) for p in expand_inputs([str(SAMPLES)])]  # what a run over the folder reads
        store.upload(s3, "caps", "night", captures, SAMPLES)
        # the TLS samples' key logs beside the night, as the job reads them on the driver
        store.upload(s3, "caps", "keys", sorted((SAMPLES / "tls").glob("*.keys")), SAMPLES / "tls")
        yield s3, endpoint, captures


def _pack(venv: Path, archive: Path, times: dict[str, float], failures: list[str]) -> threading.Thread:
    """venv-pack in a thread of its own (one core gzips while the cluster's JVMs start on the other)."""
    excluded = [arg for pattern in EXCLUDED for arg in ("--exclude", pattern)]

    def pack() -> None:
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "venv_pack", "--prefix", str(venv), "--output", str(archive),
                               "--compress-level", "1", *excluded, "--quiet"], capture_output=True, text=True,
                              cwd=archive.parent, timeout=600)
        if done.returncode == 0:
            times["venv-pack"] = time.monotonic() - start
        else:
            failures.append(done.stdout[-2000:] + done.stderr[-3000:])

    thread = threading.Thread(target=pack, name="venv-pack", daemon=True)
    thread.start()
    return thread


@pytest.fixture(scope="module")
def night(server, tmp_path_factory) -> Iterator[Night]:
    """The samples' night from S3 into an S3 lake, by spark-submit on a standalone cluster."""
    _, endpoint, captures = server
    times: dict[str, float] = {}
    clock = time.monotonic()
    venv = installed_venv(tmp_path_factory)  # (the wheel built and installed once per session)
    times.update(TIMES)
    times["wheel and venv, as this test waited for them"] = time.monotonic() - clock
    python = venv / "bin" / "python"
    [spark_home] = venv.glob("lib/python*/site-packages/pyspark")  # the cluster's Spark: the wheel's PySpark
    base = tmp_path_factory.mktemp("standalone")
    assert not base.is_relative_to(ROOT)

    archive = base / "amqpcap-env.tar.gz"
    failures: list[str] = []
    packing = _pack(venv, archive, times, failures)
    clock = time.monotonic()
    with standalone_cluster(base / "cluster", home=spark_home, worker_env=store.credentials(),
                            daemon_java_opts=DAEMON_JAVA_OPTS) as cluster:
        times["cluster start"] = time.monotonic() - clock
        packing.join(timeout=600)
        assert "venv-pack" in times, f"venv-pack failed: {failures}"
        times["cluster start and venv-pack, both done"] = time.monotonic() - clock
        job = sh(python, "-c", "import amqpcap.submit as s; print(s.__file__)", cwd=base).stdout.strip()
        assert not Path(job).is_relative_to(ROOT)
        env = clean_environment({**store.credentials(), "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": LOOPBACK,
                                 "SPARK_LOCAL_DIRS": str(base / "driver-local")})
        argv = [python.parent / "spark-submit", "--master", cluster.master, "--deploy-mode", "client",
                "--archives", f"{archive}#env",
                "--conf", "spark.pyspark.python=./env/bin/python",
                "--conf", f"spark.pyspark.driver.python={python}",
                job, "--input", NIGHT, "--lake", LAKE, "--set", f'storage.s3_endpoint="{endpoint}"',
                    "--set", f'decode.tls_keylogs=["{KEYS}"]']
        clock = time.monotonic()
        with watching_python_workers(cluster) as workers:
            result = subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=base, env=env,
                                    timeout=900)
        times["spark-submit (the job)"] = time.monotonic() - clock
        assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-6000:], cluster.log_text())
        state = cluster.state()
    times.update({name: round(seconds, 1) for name, seconds in times.items()})
    phases = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith(("time:", "amqpcap run "))]
    print("\nstandalone cluster test, seconds:", json.dumps(times), *phases, sep="\n  ")
    yield Night(result, cluster, state, captures, workers, times)
    # the big part of what it leaves (the logs stay): the archive and each executor's unpacked copy
    archive.unlink()
    for unpacked in [p for work in cluster.worker_dirs for p in work.glob("app-*/*/env")]:
        shutil.rmtree(unpacked)


def test_the_night_ran_as_one_application_on_both_workers(night):
    assert f"{len(night.captures)} files" in night.job.stdout
    assert ", 0 failed" in night.job.stdout
    [app] = night.state["completedapps"]
    assert app["name"] == "amqpcap" and app["state"] == "FINISHED" and app["cores"] == 2
    for work in night.cluster.worker_dirs:  # each worker ran an executor, which unpacked the archive
        assert list(work.glob(f"{app['id']}/*/env/bin/python")), work


def test_the_executors_run_the_archive_s_python_and_its_amqpcap(night):
    """Every Python worker of the job's executors: the interpreter the conf named, in its
    executor's work dir, with amqpcap's compiled modules mapped from the archive unpacked there."""
    assert night.workers, "no Python worker of an executor seen while the job ran"
    loaded: dict[Path, set[str]] = {}  # executor's work dir -> the compiled modules its workers had loaded
    for process in night.workers.values():
        assert process.argv[:3] == ["./env/bin/python", "-m", "pyspark.daemon"], process
        unpacked = process.cwd / "env" / "lib"
        assert unpacked.is_dir(), process
        assert all(path.is_relative_to(unpacked) for path in process.mapped), process
        assert not any(path.is_relative_to(ROOT) for path in process.mapped), process
        loaded.setdefault(process.cwd, set()).update(path.name.split(".")[0] for path in process.mapped)
    # an executor on each worker, each with amqpcap loaded; the compiled build (the wheel's) decoded
    assert {work.parent.parent for work, names in loaded.items() if names} == {
        work.resolve() for work in night.cluster.worker_dirs}, loaded
    assert {"decoder", "codec", "packets", "tcp"} <= set().union(*loaded.values()), loaded


def _relative(uri: str) -> str:
    """A capture named by its path under the night, on S3 or on disk."""
    for prefix in (NIGHT, f"file://{SAMPLES}/"):
        if uri.startswith(prefix):
            return uri[len(prefix):]
    return uri


@pytest.fixture
def reading(server, monkeypatch):
    """This process reads the S3 lake as the commands do: credentials from the environment, the
    endpoint as the settings' storage section gives it."""
    import os

    from amqpcap.process import storage_environment
    from amqpcap.settings import StorageSection
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    for name, value in {**store.credentials(), **storage_environment(StorageSection(s3_endpoint=server[1]))}.items():
        monkeypatch.setenv(name, value)


TABLE_NAMES = [t.name for t in TABLES.values() if t.name != "runs"]


@pytest.mark.parametrize("table", TABLE_NAMES)
def test_every_table_equals_the_same_samples_run_locally(night, lake, reading, table):
    local, _ = lake
    on_cluster = lake_rows(LAKE, table, _relative)
    assert on_cluster == lake_rows(local, table, _relative)
    if table in ("frames", "captures", "connections", "deliveries"):
        assert on_cluster  # (the samples have rows in these: the comparison compared something)


def test_no_credential_reaches_the_buckets_the_job_output_or_the_cluster_logs(server, night):
    s3 = server[0]
    forms = [form for secret in (store.SECRET_KEY.encode(),) for form in encodings(secret).values()]
    output = (night.job.stdout + night.job.stderr).encode()
    assert output and not any(form in output for form in forms)
    objects = 0
    for bucket in BUCKETS:
        for key, data in store.every_object(s3, bucket):
            objects += 1
            assert not any(form in data for form in forms), f"s3://{bucket}/{key}"
    assert objects > 50
    logs = [*night.cluster.logs, *(p for work in night.cluster.worker_dirs for p in work.glob("app-*/*/std*"))]
    assert len(logs) >= 5
    for log in logs:
        data = log.read_bytes()
        assert not any(form in data for form in forms), log
