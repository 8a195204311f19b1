"""The delta-spark engine is a complete engine (lake.engine = "delta-spark", the Delta jars that
amqpcap.job.jars fetched at set-up): every table holds the rows delta-rs writes for the same night;
a rerun replaces its rows; a connection carried across three nights leaves the rows delta-rs's
three nights leave (the provisional rows each night supersedes removed); the run log makes a run all or nothing (a manifest, a runs row; a run
killed between two tables' commits is invisible, then rolled forward by amqpcap repair with
Spark); two concurrent runs leave one copy; maintain compacts and vacuums with OPTIMIZE and VACUUM
and keeps every row."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from amqpcap.job.jars import installed
from amqpcap.tables.registry import TABLES
from tests.helpers.lakes import lake_rows
from tests.helpers.samples import ROOT, SAMPLES

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not installed(), reason="the Delta jars were not fetched (python -m amqpcap.job.jars)")]

NIGHT = [str(SAMPLES / name) for name in ("heartbeats.pcap", "confirms.pcap", "concurrent.pcap",
                                          "returns_nack_reject.pcap", "channel_errors.pcap")]
# (eight buckets: several files per table and date, for maintain to compact)
SPARK = ("--set", 'lake.engine="delta-spark"', "--set", "job.buckets=8")
CHECKED = [name for name in TABLES if name != "runs"]


def amqpcap(*args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "amqpcap", *args], capture_output=True, text=True, cwd=ROOT,
                            timeout=900, env={**os.environ, **env})
    assert not check or result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The night through delta-rs: the rows every delta-spark lake here must hold."""
    lake = str(tmp_path_factory.mktemp("delta-rs") / "lake")
    amqpcap("run", "--input", *NIGHT, "--lake", lake)
    return {name: lake_rows(lake, name) for name in CHECKED}


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """The night through delta-spark; every test below runs it again (reruns, a killed one, two at
    once), each leaving the rows of one run."""
    lake = str(tmp_path_factory.mktemp("delta-spark") / "lake")
    first = amqpcap("run", "--input", *NIGHT, "--lake", lake, *SPARK)
    assert "tables (delta-spark)" in first.stdout + first.stderr
    return lake


def runs(lake: str) -> list[str]:
    from amqpcap.lake import arrow
    return arrow(lake, "runs").column("run_id").to_pylist()


def same_as(lake: str, reference: dict) -> None:
    for name in CHECKED:
        assert lake_rows(lake, name) == reference[name], name


def test_every_table_holds_the_rows_delta_rs_writes(lake, reference):
    same_as(lake, reference)
    from deltalake import DeltaTable

    from amqpcap.lake.runlog import run_of
    tagged = {run_of(info) for info in DeltaTable(f"{lake}/frames").history()}
    assert set(runs(lake)) <= tagged  # each commit names its run (Spark's userMetadata)


def test_a_rerun_replaces_its_rows(lake, reference):
    before = len(runs(lake))
    amqpcap("run", "--input", *NIGHT, "--lake", lake, *SPARK)
    same_as(lake, reference)  # replaced, not doubled
    assert len(runs(lake)) == before + 1


def test_a_run_killed_between_commits_is_invisible_then_rolled_forward(lake, reference):
    from amqpcap.lake import runlog
    from amqpcap.lake.runlog import snapshot
    seen = snapshot(lake)
    killed = amqpcap("run", "--input", *NIGHT, "--lake", lake, *SPARK, check=False, AMQPCAP_FAULT="commit:3")
    assert killed.returncode == -9  # SIGKILL after two tables' commits
    (pending,) = runlog.pending_runs(lake)
    assert pending["engine"] == "delta-spark" and pending["root"]
    assert snapshot(lake) == seen  # its commits are not seen
    repaired = amqpcap("repair", "--lake", lake, *SPARK)
    assert f"run {pending['run_id']}: rolled forward" in repaired.stdout
    assert runlog.pending_runs(lake) == [] and pending["run_id"] in runs(lake)
    same_as(lake, reference)


def test_two_concurrent_runs_leave_one_copy(lake, reference):
    before = len(runs(lake))
    command = [sys.executable, "-m", "amqpcap", "run", "--input", *NIGHT, "--lake", lake, *SPARK]
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
                 for _ in range(2)]
    for process in processes:
        _, err = process.communicate(timeout=900)
        assert process.returncode == 0, err[-3000:]
    same_as(lake, reference)
    assert len(runs(lake)) == before + 2


def test_maintain_optimizes_and_vacuums_with_spark(lake, reference):
    from deltalake import DeltaTable
    files = len(DeltaTable(f"{lake}/frames").file_uris())
    maintained = amqpcap("maintain", "--lake", lake, *SPARK, "--set", "maintain.retention_hours=0")
    line = next(line for line in maintained.stdout.splitlines() if line.startswith("table=frames "))
    assert f"files={files}" in line and "compacted=" in line and "compacted=0 -> 0" not in line, line
    assert len(DeltaTable(f"{lake}/frames").file_uris()) < files
    history = DeltaTable(f"{lake}/frames").history()
    assert {"OPTIMIZE", "VACUUM END"} <= {info.get("operation") for info in history}  # Spark's own
    same_as(lake, reference)


def test_a_connection_carried_across_nights(tmp_path):
    from tests.onepass.test_carry import write_nights
    nights = write_nights(tmp_path)
    rs, spark = str(tmp_path / "rs"), str(tmp_path / "spark")
    for night in nights:
        amqpcap("run", "--input", night, "--lake", rs)
        amqpcap("run", "--input", night, "--lake", spark, *SPARK)
    for name in CHECKED:
        assert lake_rows(spark, name) == lake_rows(rs, name), name
    from amqpcap.lake import arrow
    connections = arrow(spark, "connections").to_pylist()
    assert len(connections) == 1 and not connections[0]["provisional"]  # the nights' provisional rows superseded
    assert arrow(spark, "resumptions").num_rows == 2
