"""A run is all or nothing for every reader (amqpcap.lake.runlog): a run killed at every step of its
commit sequence leaves every table readable and no partial run visible, and the next run (or
`amqpcap repair`) finishes it into exactly the tables of a clean run. Concurrent runs over the
same capture leave one copy of its rows; over different captures both land."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

from amqpcap.capture.inputs import list_inputs
from amqpcap.job.nightly import TABLES as JOB_TABLES
from amqpcap.job.nightly import run
from amqpcap.lake import runlog
from amqpcap.lake.paths import table_uri
from tests.helpers.samples import ROOT, SAMPLES

TABLES = [t.name for t in JOB_TABLES]
STEPS = 1 + len(TABLES) + 2  # manifest, each table, the runs row, the manifest's deletion
CAPTURES = [str(SAMPLES / "returns_nack_reject.pcap"), str(SAMPLES / "heartbeats.pcap")]


def contents(lake: str) -> dict[str, list]:
    """Every table as its readers see it (the snapshot): rows without run_id, and the run ids."""
    import pyarrow.parquet as pq
    versions = runlog.snapshot(lake)
    out = {}
    for name in TABLES:
        rows, runs = [], set()
        for uri in runlog.table_files(lake, name, versions[name]) if versions[name] is not None else []:
            for row in pq.read_table(uri.removeprefix("file://")).to_pylist():
                runs.add(row.pop("run_id"))
                rows.append(repr(sorted(row.items())))
        out[name] = (sorted(rows), runs)
    return out


@pytest.fixture(scope="module")
def prepared(spark, settings, tmp_path_factory):
    """A lake with run "one" committed and run "two" (the same captures) written, not committed:
    (pristine lake, manifest of two, tables after a clean commit of two)."""
    base = str(tmp_path_factory.mktemp("runlog") / "lake")
    files = list_inputs(CAPTURES)
    run(spark, files, settings, base, "one")
    manifest = run(spark, files, settings, base, "two", commit=False).manifest
    clean = str(tmp_path_factory.mktemp("clean") / "lake")
    shutil.copytree(base, clean)
    runlog.commit_run(clean, manifest)
    return base, manifest, contents(clean), contents(base)


def commit_in_subprocess(lake: str, manifest: dict, fault: str | None = None, at: float = 0.0) -> int:
    """Exit code of commit_run in another process; `at`: the wall-clock time to start committing
    at, once imports are done (two processes then race within a millisecond or so)."""
    path = f"{lake}.{manifest['run_id']}.manifest.json"
    with open(path, "w") as f:
        json.dump(manifest, f)
    env = {**os.environ, **({"AMQPCAP_FAULT": fault} if fault else {})}
    code = ("import json, sys, time; from amqpcap.lake.runlog import commit_run; import deltalake; "
            f"time.sleep(max(0.0, {at!r} - time.time())); commit_run(sys.argv[1], json.load(open(sys.argv[2])))")
    return subprocess.run([sys.executable, "-c", code, lake, path], env=env, cwd=ROOT, timeout=300).returncode


@pytest.mark.parametrize("step", range(1, STEPS + 1))
def test_a_run_killed_at_any_commit_step_is_invisible_then_finished(prepared, tmp_path, step):
    base, manifest, clean, before = prepared
    lake = str(tmp_path / "lake")
    shutil.copytree(base, lake)
    assert commit_in_subprocess(lake, manifest, f"commit:{step}") == -9  # SIGKILL
    from deltalake import DeltaTable
    for name in TABLES:  # every table readable, at its latest version too
        DeltaTable(table_uri(lake, name)).file_uris()
    seen = contents(lake)
    complete = step >= STEPS - 1  # killed after the runs row: the run is complete
    assert seen == (clean if complete else before)
    assert all(runs <= ({"two"} if complete else {"one"}) for _, runs in seen.values())
    assert [r for r, _ in runlog.repair(lake)] == ([] if complete else ["two"])
    assert contents(lake) == clean
    assert runlog.pending_runs(lake) == []


def test_a_run_whose_files_are_gone_is_rolled_back(prepared, tmp_path):
    base, manifest, _, before = prepared
    lake = str(tmp_path / "lake")
    shutil.copytree(base, lake)
    assert commit_in_subprocess(lake, manifest, "commit:5") == -9
    gone = manifest["files"]["deliveries"][0]
    os.remove(f"{lake}/deliveries/{gone['path']}")
    assert runlog.repair(lake) == [("two", "rolled back")]
    assert contents(lake) == before and runlog.pending_runs(lake) == []


def test_two_runs_over_the_same_capture_at_once_leave_one_copy(spark, settings, tmp_path):
    """Two runs' commits race, six times on fresh copies of the lake, the processes starting their
    commits at the same instant: in every table the rows of one run alone remain. (While delta-rs
    retried a lost commit by itself, rebasing one run's creation of a table onto the other's, both
    copies stayed in most of these races, and in about one in six without the common start.)"""
    written = str(tmp_path / "written")
    files = list_inputs(CAPTURES[:1])
    manifests = [run(spark, files, settings, written, name, commit=False).manifest for name in ("a", "b")]
    single = str(tmp_path / "single")
    shutil.copytree(written, single)
    runlog.commit_run(single, manifests[0])
    alone = contents(single)
    for attempt in range(6):
        lake = str(tmp_path / f"lake-{attempt}")
        shutil.copytree(written, lake)
        codes, at = [], time.time() + 1.5  # both processes have imported by then
        threads = [threading.Thread(target=lambda m=m: codes.append(commit_in_subprocess(lake, m, at=at)))
                   for m in manifests]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert codes == [0, 0]
        both = contents(lake)
        for name in TABLES:  # each table's race has its winner, whose rows alone remain
            assert both[name][0] == alone[name][0] and len(both[name][1]) <= 1, (attempt, name)


def test_two_runs_over_different_captures_at_once_both_land(spark, settings, tmp_path):
    lake = str(tmp_path / "lake")
    manifests = [run(spark, list_inputs([c]), settings, lake, f"r{i}", commit=False).manifest
                 for i, c in enumerate(CAPTURES)]
    codes = []
    threads = [threading.Thread(target=lambda m=m: codes.append(commit_in_subprocess(lake, m))) for m in manifests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert codes == [0, 0]
    frames = contents(lake)["frames"]
    assert frames[1] == {"r0", "r1"}
    separate = str(tmp_path / "separate")
    run(spark, list_inputs(CAPTURES), settings, separate, "x")
    assert frames[0] == contents(separate)["frames"][0]


def test_a_stale_commit_replacing_the_same_capture_conflicts(tmp_path):
    """The mechanism behind one copy: a commit that read the table before another run replaced the
    same capture fails (and runlog retries it on the new state) instead of appending a second copy."""
    import time

    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
    from deltalake.exceptions import CommitFailedError
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"capture": ["x"]}))
    stale = DeltaTable(uri)

    def claims(capture):
        now = int(time.time() * 1000)
        return CommitProperties(app_transactions=[Transaction(runlog.capture_claim(capture), now, now)])
    write_deltalake(uri, pa.table({"capture": ["x"]}), mode="append", commit_properties=claims("x"))
    with pytest.raises(CommitFailedError, match="Concurrent transaction"):
        stale.create_write_transaction([], mode="append", schema=stale.schema(), commit_properties=claims("x"))
    DeltaTable(uri).create_write_transaction([], mode="append", schema=stale.schema(),
                                             commit_properties=claims("y"))  # another capture: no conflict


def test_a_commit_that_loses_the_race_to_create_a_table_is_retried(tmp_path, monkeypatch):
    """Two first runs into an empty lake both find no table and both create it: the loser's create
    fails with delta-rs's 'SaveMode append is not allowed' (no word of a conflict), and must be
    retried as an append, not leave its run pending (which hid the run from every reader)."""
    from deltalake import DeltaTable

    from amqpcap.tables.registry import TABLES as ALL
    lake = str(tmp_path / "lake")
    table = ALL["frames"]
    runlog.apply_table(lake, table, [], set(), "a", int(time_ms()))
    real, calls = DeltaTable.is_deltatable, []

    def not_yet(uri, *args, **kwargs):  # the winner's table appears after the loser looked
        calls.append(uri)
        return False if len(calls) <= 3 else real(uri, *args, **kwargs)
    monkeypatch.setattr(DeltaTable, "is_deltatable", staticmethod(not_yet))
    version = runlog.apply_table(lake, table, [], set(), "b", int(time_ms()))
    monkeypatch.undo()
    assert version == 1
    assert [info.get(runlog.RUN_TAG) for info in DeltaTable(table_uri(lake, table)).history()] == ["b", "a"]


def time_ms() -> int:
    import time
    return int(time.time() * 1000)


def test_s3_has_one_spelling_in_the_lake_and_hadoops_for_spark():
    from amqpcap.lake.paths import absolute, hadoop_uri
    assert absolute("s3a://bucket/lake") == absolute("s3n://bucket/lake") == "s3://bucket/lake"
    assert table_uri("s3a://bucket/lake/", "frames") == "s3://bucket/lake/frames"
    assert hadoop_uri("s3://bucket/lake/frames") == "s3a://bucket/lake/frames"
    assert hadoop_uri("/data/lake/frames") == "/data/lake/frames" and hadoop_uri("gs://b/l") == "gs://b/l"
