"""Captures and the lake on S3-compatible object storage, end to end, as a user runs it: `amqpcap
run`, `analyze`, `repair`, `maintain` and `report` as commands against a real S3 server on loopback
(moto's server mode), credentials from the standard AWS environment, the endpoint from the settings
(storage.s3_endpoint). A night on S3 gives the tables the same night on disk gives; reruns and
concurrent runs leave one copy; a run killed while committing is repaired; the lake helpers read it;
no credential reaches the lake or the logs."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from amqpcap.job.jars import installed
from amqpcap.tables.registry import TABLES
from tests.helpers import s3 as store
from tests.helpers.lakes import lake_rows
from tests.helpers.samples import ROOT, SAMPLES

pytestmark = pytest.mark.slow

# A night of a few samples (a gzip one among them), small enough for several runs of it.
NIGHT = [SAMPLES / name for name in ("heartbeats.pcap", "confirms.pcap", "concurrent.pcap",
                                     "returns_nack_reject.pcap", "crafted/clean.pcap.gz")]
LAKE = "s3://lake/amqp"


def amqpcap(*args: str, env: dict, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "amqpcap", *args], capture_output=True, text=True, env=env,
                            cwd=ROOT, timeout=600)
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def server():
    with store.moto_server() as endpoint:
        s3 = store.client(endpoint)
        for bucket in ("caps", "lake", "other"):
            s3.create_bucket(Bucket=bucket)
        store.upload(s3, "caps", "night", NIGHT, SAMPLES)
        # the endpoint from the settings, credentials from the environment (not AWS_ENDPOINT_URL)
        env = store.environment()
        endpoint_setting = ["--set", f'storage.s3_endpoint="{endpoint}"']
        yield s3, env, endpoint_setting, [], endpoint


@pytest.fixture(scope="module")
def night(server, tmp_path_factory):
    """The night on S3 into an S3 lake, and the same night on disk into a local lake."""
    s3, env, endpoint, logs, _ = server
    logs.append(amqpcap("run", "--input", "s3://caps/night/", "--lake", LAKE, *endpoint, env=env))
    local = str(tmp_path_factory.mktemp("local") / "lake")
    amqpcap("run", "--input", *map(str, NIGHT), "--lake", local, env=env)
    return local


def _relative(uri: str) -> str:
    """A capture named by its path under the night, on S3 or on disk."""
    for prefix in ("s3://caps/night/", f"file://{SAMPLES}/"):
        if uri.startswith(prefix):
            return uri[len(prefix):]
    return uri


@pytest.fixture
def reading(server, monkeypatch):
    """This process reads the S3 lake as the commands do: credentials from the environment, the
    endpoint as the settings' storage section gives it."""
    from amqpcap.process import storage_environment
    from amqpcap.settings import StorageSection
    url = server[4]
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    for name, value in {**store.credentials(), **storage_environment(StorageSection(s3_endpoint=url))}.items():
        monkeypatch.setenv(name, value)


TABLE_NAMES = [t.name for t in TABLES.values() if t.name != "runs"]


@pytest.mark.parametrize("table", TABLE_NAMES)
def test_a_night_on_s3_gives_the_tables_of_the_same_night_on_disk(night, reading, table):
    on_s3, on_disk = lake_rows(LAKE, table, _relative), lake_rows(night, table, _relative)
    assert on_s3 == on_disk
    if table in ("frames", "captures", "connections"):
        assert on_s3  # (the night has rows in these: the comparison compared something)


def test_a_rerun_on_s3_replaces_its_rows(server, night, reading):
    s3, env, endpoint, logs, _ = server
    before = {name: lake_rows(LAKE, name, _relative) for name in ("frames", "deliveries", "captures")}
    logs.append(amqpcap("run", "--input", "s3://caps/night/", "--lake", LAKE, *endpoint, env=env))
    assert {name: lake_rows(LAKE, name, _relative) for name in before} == before


def test_two_concurrent_runs_on_s3_leave_one_copy(server, night, reading):
    s3, env, endpoint, logs, _ = server
    lake = "s3://other/concurrent"
    command = [sys.executable, "-m", "amqpcap", "run", "--input", "s3://caps/night/", "--lake", lake, *endpoint]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
            for _ in range(2)]
    for process in runs:
        out, err = process.communicate(timeout=600)
        logs.append(subprocess.CompletedProcess(command, process.returncode, out, err))
        assert process.returncode == 0, err[-3000:]
    for name in ("frames", "deliveries", "publishes", "connections"):
        assert lake_rows(lake, name, _relative) == lake_rows(night, name, _relative), name


def test_a_run_killed_while_committing_on_s3_is_repaired(server, night, reading):
    s3, env, endpoint, logs, _ = server
    lake = "s3://other/killed"
    killed = amqpcap("run", "--input", "s3://caps/night/", "--lake", lake, *endpoint,
                     env={**env, "AMQPCAP_FAULT": "commit:2"}, check=False)
    assert killed.returncode == -9  # SIGKILL, between two tables' commits
    from amqpcap.lake import runlog
    assert [m["run_id"] for m in runlog.pending_runs(lake)]  # interrupted: its manifest waits
    repaired = amqpcap("repair", "--lake", lake, *endpoint, env=env)
    logs.append(repaired)
    assert "rolled forward" in repaired.stdout + repaired.stderr
    assert runlog.pending_runs(lake) == []
    for name in ("frames", "deliveries", "captures"):
        assert lake_rows(lake, name, _relative) == lake_rows(night, name, _relative), name


def test_the_report_the_helpers_analyze_and_maintain_take_s3(server, night, reading, tmp_path):
    s3, env, endpoint, logs, _ = server
    page = tmp_path / "report.html"
    logs.append(amqpcap("report", "--lake", LAKE, "-o", str(page), *endpoint, env=env))
    assert page.stat().st_size > 100_000 and b"plotly" in page.read_bytes()[:2_000_000].lower()
    from amqpcap.lake import arrow, duckdb_views, polars_frames
    frames = arrow(LAKE, "frames").num_rows
    assert frames > 100
    assert duckdb_views(LAKE).sql("SELECT count(*) FROM frames").fetchall() == [(frames,)]
    assert polars_frames(LAKE)["frames"].collect().height == frames
    deliveries = lake_rows(LAKE, "deliveries", _relative)
    logs.append(amqpcap("analyze", "--lake", LAKE, *endpoint, env=env))
    assert lake_rows(LAKE, "deliveries", _relative) == deliveries
    logs.append(amqpcap("maintain", "--lake", LAKE, *endpoint, env=env))
    assert arrow(LAKE, "frames").num_rows == frames


def test_decode_reads_captures_on_s3(server):
    s3, env, endpoint, logs, _ = server
    remote = amqpcap("decode", "--jsonl", "s3://caps/night/", *endpoint, env=env)
    listed = sorted(NIGHT, key=lambda p: str(p.relative_to(SAMPLES)))  # as the store lists them
    local = amqpcap("decode", "--jsonl", *map(str, listed), env=env)
    logs.append(remote)
    assert remote.stdout.count("\n") > 500
    assert remote.stdout.replace("s3://caps/night/", "") == local.stdout.replace(f"{SAMPLES}/", "")


@pytest.mark.skipif(not installed(), reason="the Delta and S3A jars were not fetched (python -m amqpcap.job.jars)")
def test_the_delta_spark_engine_writes_an_s3_lake_through_s3a(server, night, reading):
    """delta-spark through Hadoop's S3A connector (hadoop-aws, fetched at set-up): the lake given
    as s3a://, the same rows; the run log and the readers reach it as s3://."""
    s3, env, endpoint, logs, _ = server
    lake = "s3a://other/spark"
    logs.append(amqpcap("run", "--input", "s3://caps/night/", "--lake", lake, *endpoint,
                        "--set", 'lake.engine="delta-spark"', env=env))
    assert "tables (delta-spark)" in logs[-1].stdout + logs[-1].stderr
    for name in ("frames", "deliveries", "publishes", "connections", "captures", "message_flows"):
        assert lake_rows(lake, name, _relative) == lake_rows(night, name, _relative), name
    history = s3.get_object(Bucket="other", Key="spark/frames/_delta_log/00000000000000000000.json")["Body"].read()
    assert b'"engineInfo":"Apache-Spark' in history  # Spark's own commit, not delta-rs's


def test_no_credential_reaches_the_lake_or_the_logs(server, night):
    """(Last in the module: every run above has written its logs and its objects.)"""
    s3, env, endpoint, logs, _ = server
    time.sleep(0.1)
    secrets = (store.SECRET_KEY.encode(), store.ACCESS_KEY.encode())
    assert logs and all(log.stdout is not None for log in logs)
    for log in logs:
        for secret in secrets:
            assert secret.decode() not in log.stdout + log.stderr
    objects = 0
    for bucket in ("lake", "other"):
        for key, data in store.every_object(s3, bucket):
            objects += 1
            for secret in secrets:
                assert secret not in data, f"s3://{bucket}/{key}"
    assert objects > 50
