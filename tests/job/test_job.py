"""The Spark job end to end on data/samples: every table against the samples' known facts, reruns,
a corrupt file among good ones, rotated files, and a run on a local cluster."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections import Counter

import pytest

from amqpcap.capture.inputs import list_inputs
from amqpcap.job.nightly import run
from amqpcap.lake.spark_read import read_table
from amqpcap.tables.registry import ANALYTICS_TABLES, RAW_TABLES, STATE_TABLES
from tests.helpers.samples import EXPECTED, ROOT, SAMPLES, capture_for, uri

ALL = {t.name for t in RAW_TABLES + ANALYTICS_TABLES + STATE_TABLES}

RECORDED = [p for p in EXPECTED if p.parent.name != "crafted"]


def test_every_sample_lands_with_its_known_facts(spark, lake):
    path, summary = lake
    assert summary.versions == dict.fromkeys(ALL, 0)
    frames = read_table(spark, path, "frames").where("kind = 'method'").groupBy(
        "capture", "direction", "method").count().collect()
    counted = Counter({(r.capture, r.direction, r.method): r["count"] for r in frames})
    for expected_path in EXPECTED:
        expected = json.loads(expected_path.read_text())
        capture = uri(capture_for(expected_path))
        for direction in ("C>S", "S>C"):
            want = Counter(expected["methods"][direction]) - Counter(
                expected.get("not_decodable", {}).get(direction, {}))
            got = Counter({m: n for (c, d, m), n in counted.items() if c == capture and d == direction})
            assert got == want, (expected_path.name, direction)


def test_every_table_equals_its_golden_copy(lake):
    """The job end to end against the tables 0.1.0 produced (tests/golden; the intentional
    differences are in tests/rules/test_golden.py)."""
    from tests.rules.test_golden import assert_golden, golden_captures
    from tools.golden_tables import canonical_rows
    path, _ = lake
    known = set(golden_captures("samples"))  # samples recorded since are not in the golden copy
    for table in sorted(t.name for t in RAW_TABLES + ANALYTICS_TABLES  # (state tables are new, and
                        if t.name not in ("tls_connections", "findings")):  # TLS samples only; findings: newer)
        rows = [line for line in canonical_rows(path, table, str(SAMPLES))
                if json.loads(line).get("capture", json.loads(line).get("path")) in known
                or (table == "message_flows" and json.loads(line)["capture"] in known)]
        assert_golden("samples", table, rows)


def test_messages_and_issues_tables(spark, lake):
    path, _ = lake
    messages = read_table(spark, path, "messages")
    for expected_path in RECORDED:
        expected = json.loads(expected_path.read_text())
        capture = uri(capture_for(expected_path))
        mine = messages.where(messages.capture == capture)
        assert mine.where("method = 'basic.publish'").count() == expected["messages"]["published"]
        assert mine.where("method = 'basic.return'").count() == expected["messages"]["returned"]
    issues = read_table(spark, path, "decode_issues")
    skipped = {r.capture: r.skipped for r in issues.groupBy("capture").agg({"bytes_skipped": "sum"})
               .withColumnRenamed("sum(bytes_skipped)", "skipped").collect()}
    for expected_path in EXPECTED:
        expected = json.loads(expected_path.read_text())
        if "bytes_skipped" in expected:
            assert skipped.get(uri(capture_for(expected_path)), 0) == sum(expected["bytes_skipped"].values())


def test_captures_table(spark, lake):
    path, _ = lake
    captures = {r.path: r for r in read_table(spark, path, "captures").collect()}
    assert len(captures) == len(EXPECTED)
    gz = captures[uri(SAMPLES / "crafted" / "truncated_gzip.pcap.gz")]
    assert (gz.status, gz.error) == ("partial", "the last record holds 24 of its 54 bytes (a capture cut "
                                                "while being written?)")
    assert captures[uri(SAMPLES / "concurrent.pcap")].link_types == ["LINUX_SLL2"]
    assert all(r.fingerprint and len(r.fingerprint) == 64 for r in captures.values())
    assert all(r.packets > 0 and r.first_ts <= r.last_ts for r in captures.values())


def rows_of(spark, lake, table, drop=("run_id",)):
    return sorted((tuple(r) for r in read_table(spark, lake, table).drop(*drop).collect()), key=repr)


def test_rerun_replaces_never_duplicates(spark, settings, tmp_path):
    path = str(tmp_path / "lake")
    files = list_inputs([str(SAMPLES / "returns_nack_reject.pcap"), str(SAMPLES / "heartbeats.pcap")])
    first = run(spark, files, settings, path, "run-a")
    before = {table: rows_of(spark, path, table) for table in ALL}
    second = run(spark, files, settings, path, "run-b")
    assert second.versions == {name: v + 1 for name, v in first.versions.items()}
    for table in ALL:
        assert rows_of(spark, path, table) == before[table], table
        assert {r.run_id for r in read_table(spark, path, table).select("run_id").distinct().collect()} <= {"run-b"}
    # another day's capture leaves the first ones untouched
    run(spark, list_inputs([str(SAMPLES / "confirms.pcap")]), settings, path, "run-c")
    assert read_table(spark, path, "frames").where("run_id = 'run-b'").count() == len(before["frames"])


def test_a_corrupt_file_fails_alone(spark, settings, tmp_path):
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"\x00" * 1000)
    path = str(tmp_path / "lake")
    files = list_inputs([str(SAMPLES / "heartbeats.pcap"), str(junk), str(tmp_path / "missing.pcap")])
    summary = run(spark, files, settings, path, "run-x")
    assert len(summary.failed) == 2
    status = {r.path: (r.status, r.error) for r in read_table(spark, path, "captures").collect()}
    assert status[uri(junk)][0] == "failed" and "not a pcap" in status[uri(junk)][1]
    assert status[uri(tmp_path / "missing.pcap")] == ("failed", "no such file")
    heartbeats = read_table(spark, path, "frames").where("kind = 'heartbeat'").count()
    assert heartbeats >= 4


def test_rotated_files_give_the_same_tables(spark, settings, tmp_path):
    data = (SAMPLES / "large_and_pipelined.pcap").read_bytes()
    header, records, pos = data[:24], [], 24
    while pos < len(data):
        length = struct.unpack_from("<I", data, pos + 8)[0]
        records.append(data[pos:pos + 16 + length])
        pos += 16 + length
    folder = tmp_path / "rotated"
    folder.mkdir()
    size = -(-len(records) // 20)
    for i in range(0, len(records), size):
        (folder / f"part{i // size:03d}.pcap").write_bytes(header + b"".join(records[i:i + size]))
    whole, split = str(tmp_path / "whole"), str(tmp_path / "split")
    run(spark, list_inputs([str(SAMPLES / "large_and_pipelined.pcap")]), settings, whole, "w")
    run(spark, list_inputs([str(folder)]), settings, split, "s")
    # every table but captures is the same; rows name the file holding their first byte, and the
    # one whose decoding made them (a saved state names the files it read), numbered within that file
    unnamed = ("run_id", "capture", "source", "state", "pcap_record", "pcap_record_last", "tcp_stream")
    for table in ALL - {"captures"}:
        assert rows_of(spark, split, table, unnamed) == rows_of(spark, whole, table, unnamed), table


@pytest.mark.slow
def test_local_cluster_run(tmp_path):
    """Executors in separate JVMs and Python workers: nothing may depend on driver state."""
    lake = tmp_path / "lake"
    result = subprocess.run([sys.executable, "-m", "amqpcap", "run", "--input",
                             str(SAMPLES / "channels_qos_get.pcap"), "--lake", str(lake),
                             "--master", "local-cluster[2,1,1024]"], capture_output=True, text=True,
                            cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "1 ok, 0 partial, 0 failed" in result.stdout


def test_a_failed_commit_is_invisible_and_the_next_run_finishes_it(spark, settings, tmp_path, monkeypatch):
    from amqpcap.lake import runlog
    path = str(tmp_path / "lake")
    files = list_inputs([str(SAMPLES / "heartbeats.pcap")])
    first = run(spark, files, settings, path, "good")
    real = runlog.apply_table

    def failing(lake, table, *args):
        if table.name == "messages":
            raise RuntimeError("storage went away")
        return real(lake, table, *args)
    monkeypatch.setattr(runlog, "apply_table", failing)
    with pytest.raises(RuntimeError, match="storage went away"):
        run(spark, files, settings, path, "bad")
    for table in ALL:  # captures and frames were committed by "bad": readers still see "good" only
        assert {r.run_id for r in read_table(spark, path, table).select("run_id").distinct().collect()} <= {"good"}
    assert read_table(spark, path, "frames").count() == first.rows["frames"]
    monkeypatch.setattr(runlog, "apply_table", real)
    run(spark, list_inputs([str(SAMPLES / "confirms.pcap")]), settings, path, "next")  # repairs "bad" first
    frames = read_table(spark, path, "frames")
    assert {r.run_id for r in frames.select("run_id").distinct().collect()} == {"bad", "next"}
    assert frames.where("run_id = 'bad'").count() == first.rows["frames"]


def test_errors_table_holds_every_known_error(spark, lake):
    path, summary = lake
    assert summary.versions["errors"] == 0
    table = read_table(spark, path, "errors")
    for expected_path in RECORDED:
        expected = json.loads(expected_path.read_text())
        mine = table.where(table.capture == uri(capture_for(expected_path)))
        codes = expected["reply_codes"]
        want = sorted(c for c in codes["connection.close"] + codes["channel.close"] if c not in (0, 200))
        got = sorted(r.reply_code for r in mine.where("method like '%.close'").collect())
        assert got == want, expected_path.name
        assert sorted(r.reply_code for r in mine.where("method = 'basic.return'").collect()) == \
            sorted(codes["basic.return"])
        assert mine.where("method = 'basic.nack'").count() == expected["messages"]["confirm_nacks"]
    assert table.where("reply_code = 404 and reply_name is null").count() == 0


def test_analyze_replays_the_raw_layer_into_the_same_tables(spark, settings, tmp_path):
    """The rebuild runs the same state machines over the lake's frames: the same rows."""
    from amqpcap.job.analyze import analyze
    path = str(tmp_path / "lake")
    run(spark, list_inputs([str(SAMPLES)]), settings, path, "run-1")
    before = {t.name: rows_of(spark, path, t.name) for t in ANALYTICS_TABLES}
    versions = analyze(spark, path, settings, "rebuild")
    assert versions == {t.name: 1 for t in ANALYTICS_TABLES}
    for table in ANALYTICS_TABLES:
        assert rows_of(spark, path, table.name) == before[table.name], table.name
        assert {r.run_id for r in read_table(spark, path, table.name).select("run_id").distinct().collect()} \
            <= {"rebuild"}


def test_deliveries_table_settles_as_the_samples_did(spark, lake):
    path, _ = lake
    table = read_table(spark, path, "deliveries")
    for expected_path in RECORDED:
        facts = json.loads(expected_path.read_text())["messages"]
        mine = [r for r in table.where(table.capture == uri(capture_for(expected_path))).collect()]
        outcomes = Counter(r.outcome for r in mine)
        assert len(mine) == facts["delivered"] + facts["get_ok"], expected_path.name
        assert (outcomes["ack"], outcomes["nack"], outcomes["reject"]) == \
            (facts["acked"], facts["nacked"], facts["rejected"]), expected_path.name
        assert sum(bool(r.requeue) for r in mine) == facts["requeued"]
        assert sum(bool(r.redelivered) for r in mine) == facts["redelivered"]
        assert all(r.settle_latency_ms >= 0 for r in mine if r.settle_latency_ms is not None)
        if expected_path.name == "abrupt_kill.expected.json":
            # the killed client never acked its get-ok; its TCP end (no close method) settles it
            streams = read_table(spark, path, "streams").where(f"capture = '{uri(capture_for(expected_path))}'")
            end = streams.where("status = 'amqp'").collect()[0]
            assert end.end_reason in ("fin", "rst")
            assert [(r.outcome, r.settled_at) for r in mine] == [("connection-closed", end.last_ts)]


def test_publishes_table_confirms_as_the_samples_did(spark, lake):
    path, _ = lake
    table = read_table(spark, path, "publishes")
    for expected_path in RECORDED:
        facts = json.loads(expected_path.read_text())["messages"]
        mine = [r for r in table.where(table.capture == uri(capture_for(expected_path))).collect()]
        assert len(mine) == facts["published"], expected_path.name
        assert sum(r.returned for r in mine) == facts["returned"]
        assert sum(r.confirm_outcome == "ack" for r in mine) == facts["confirmed_messages"]
        assert all(r.confirm_latency_ms >= 0 for r in mine if r.confirm_latency_ms is not None)
        assert all(r.body_sha256 is None or len(r.body_sha256) == 64 for r in mine)


def test_rpc_calls_table(spark, lake):
    path, _ = lake
    table = read_table(spark, path, "rpc_calls")
    for expected_path in RECORDED:
        expected = json.loads(expected_path.read_text())
        mine = [r for r in table.where(table.capture == uri(capture_for(expected_path))).collect()]
        codes = expected["reply_codes"]["connection.close"] + expected["reply_codes"]["channel.close"]
        assert all(r.error_code in codes for r in mine if r.outcome == "error"), expected_path.name
        if all(c in (0, 200) for c in codes) and expected_path.name != "abrupt_kill.expected.json":
            assert {r.outcome for r in mine} <= {"ok"}, expected_path.name
        assert all(r.latency_ms >= 0 for r in mine if r.latency_ms is not None)
        opens = sum(r.request == "channel.open" and r.outcome == "ok" for r in mine)
        assert opens == expected["channels_opened"], expected_path.name


def test_streams_table_accounts_for_every_connection_and_byte(spark, lake):
    path, _ = lake
    table = read_table(spark, path, "streams")
    for expected_path in EXPECTED:
        expected = json.loads(expected_path.read_text())
        mine = [r for r in table.where(table.capture == uri(capture_for(expected_path))).collect()]
        assert len(mine) == expected["connections"], expected_path.name  # every one, AMQP or not
        assert Counter(r.status for r in mine if r.status != "amqp") == Counter(
            p["protocol"] for p in expected.get("protocols", []) if p["protocol"] != "amqp-0-9-1") + Counter(
            {"http": 1} if expected_path.name.startswith("protocol_headers") else {}) + Counter(
            "tls" for c in expected.get("tls", []) if c["tls"] and not c["key_logged"]), expected_path.name
        assert any(not r.syn_seen for r in mine) == expected["capture"]["starts_mid_stream"]
        for r in mine:
            if not r.tls:  # (a TLS stream's bytes are the TCP stream's, decoded and skipped the decrypted
                # stream's: tests/job/test_tls_tables.py accounts for both layers)
                assert r.c2s_stream_bytes == r.c2s_decoded_bytes + r.c2s_skipped_bytes
                assert r.s2c_stream_bytes == r.s2c_decoded_bytes + r.s2c_skipped_bytes
            assert r.end_reason in ("fin", "rst", "capture-end", "port-reuse")


def test_connections_table(spark, lake):
    path, _ = lake
    table = read_table(spark, path, "connections")
    for expected_path in RECORDED:
        expected = json.loads(expected_path.read_text())
        every = table.where(table.capture == uri(capture_for(expected_path))).collect()
        assert len(every) == expected["connections"], expected_path.name
        mine = [r for r in every if r.status == "amqp"]
        assert {r.auth_mechanism for r in mine} - {None} == set(expected["auth_mechanisms"])
        assert {r.auth_user for r in mine} - {None} == set(expected["users"])
        assert sum(r.channels_opened or 0 for r in mine) == expected["channels_opened"]
        assert sum(r.messages_published or 0 for r in mine) == expected["messages"]["published"]
        assert all(r.handshake_ms is None or r.handshake_ms >= 0 for r in mine)


def test_heartbeats_and_flow_control_tables(spark, lake):
    path, _ = lake
    beats = read_table(spark, path, "heartbeats")
    for expected_path in RECORDED:
        expected = json.loads(expected_path.read_text())
        mine = beats.where(beats.capture == uri(capture_for(expected_path))).collect()
        for direction, minimum in expected["heartbeats_min"].items():
            assert sum(r.heartbeats for r in mine if r.direction == direction) >= minimum, expected_path.name
    flows = read_table(spark, path, "flow_control").collect()
    # connection_errors: a client's channel.flow active=false, answered by a 540 connection close;
    # blocked_publisher: the broker's connection.blocked ("low on memory") until its unblocked
    got = sorted((r.mechanism, r.initiator, r.reason, r.ended_at is None) for r in flows)
    assert got == [("channel.flow", "client", None, True), ("connection.blocked", "server", "low on memory", False)]


def test_channels_table(spark, lake):
    path, _ = lake
    table = read_table(spark, path, "channels")
    for expected_path in RECORDED:
        expected = json.loads(expected_path.read_text())
        methods, facts = expected["methods"], expected["messages"]
        mine = table.where(table.capture == uri(capture_for(expected_path))).collect()
        assert sum(r.publishes for r in mine) == facts["published"], expected_path.name
        assert sum(r.deliveries for r in mine) == facts["delivered"] + facts["get_ok"]
        assert sum(r.acks for r in mine) == methods["C>S"].get("basic.ack", 0)
        assert sum(r.confirms for r in mine) == facts["confirm_acks"] + facts["confirm_nacks"]
        assert all(r.close_code in expected["reply_codes"]["channel.close"] for r in mine if r.close_code is not None)


def test_message_flows_table(spark, lake):
    path, _ = lake
    flows = read_table(spark, path, "message_flows")
    messages = read_table(spark, path, "messages")
    for expected_path in RECORDED:
        capture = uri(capture_for(expected_path))
        mine = flows.where(flows.capture == capture).collect()
        sent = messages.where(messages.capture == capture)
        deliveries = sent.where("method in ('basic.deliver', 'basic.get-ok')").count()
        assert sum(r.consumer_connection is not None for r in mine) == deliveries, expected_path.name
        publishes = sent.where("method = 'basic.publish'").count()
        with_publisher = [r for r in mine if r.publisher_connection is not None]
        assert len(with_publisher) >= publishes  # (fan-out and redeliveries repeat a publish)
        if deliveries == 0:  # nothing consumed: every publish stands alone, once
            assert len(with_publisher) == publishes and all(r.match is None for r in with_publisher)
        assert all(r.publish_to_deliver_ms >= 0 for r in mine if r.publish_to_deliver_ms is not None)


def test_multiple_acks_and_empty_gets(spark, lake):
    path, _ = lake
    frames = read_table(spark, path, "frames")
    calls = read_table(spark, path, "rpc_calls")
    for expected_path in RECORDED:
        facts = json.loads(expected_path.read_text())["messages"]
        capture = uri(capture_for(expected_path))
        multiple = frames.where((frames.capture == capture) & (frames.method == "basic.ack") &
                                (frames.direction == "C>S") & frames.multiple).count()
        assert multiple == facts["acked_multiple_frames"], expected_path.name
        empty = calls.where((calls.capture == capture) & (calls.reply == "basic.get-empty")).count()
        assert empty == facts["get_empty"], expected_path.name


def test_reruns_are_idempotent_whatever_the_spelling_of_a_path(spark, settings, tmp_path, monkeypatch):
    """A capture named relatively, then absolutely, then copied under another name: its rows are
    replaced each time, never duplicated, and the summary says when the same bytes came back."""
    import os
    import shutil
    path = str(tmp_path / "lake")
    shutil.copy(SAMPLES / "returns_nack_reject.pcap", tmp_path / "a.pcap")
    monkeypatch.chdir(tmp_path)
    first = run(spark, list_inputs(["a.pcap"]), settings, path, "relative")
    unnamed = ("run_id", "capture", "source", "state")  # the file's name, and a saved state names it too
    once = {table: rows_of(spark, path, table, unnamed) for table in ALL - {"captures"}}
    run(spark, list_inputs([str(tmp_path / "a.pcap")]), settings, path, "absolute")
    run(spark, list_inputs([f"{tmp_path}/./a.pcap"]), settings, path, "dotted")
    for table in ALL - {"captures"}:
        assert rows_of(spark, path, table, unnamed) == once[table], table
    os.rename(tmp_path / "a.pcap", tmp_path / "renamed.pcap")
    moved = run(spark, list_inputs(["renamed.pcap"]), settings, path, "renamed")
    assert moved.same_bytes == [(uri(tmp_path / "renamed.pcap"), uri(tmp_path / "a.pcap"))]
    assert "same bytes as before" in moved.text()
    for table in ALL - {"captures"}:
        assert rows_of(spark, path, table, unnamed) == once[table], table
    captures = read_table(spark, path, "captures").collect()
    assert [(r.path, r.run_id) for r in captures] == [(uri(tmp_path / "renamed.pcap"), "renamed")]
    assert first.rows["frames"] == len(once["frames"])


def test_every_file_carries_its_tables_declared_schema(lake):
    """Each active Parquet file has exactly the Delta table's schema (less the date partition):
    DuckDB and other readers of the files see the declared types."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    from amqpcap.lake import runlog
    from amqpcap.lake.paths import table_uri
    from amqpcap.tables.registry import TABLES
    path, _ = lake
    for name, table in TABLES.items():
        delta = DeltaTable(table_uri(path, name)).schema().to_arrow()
        expected = pa.schema([f for f in table.arrow().remove_metadata() if f.name != "date"])
        declared = pa.schema([f.remove_metadata() for f in pa.schema(delta) if f.name != "date"])
        assert declared.equals(expected), name
        for file_uri in runlog.table_files(path, name):
            actual = pq.read_schema(file_uri.removeprefix("file://")).remove_metadata()
            assert pa.schema([f.remove_metadata() for f in actual]).equals(expected), (name, file_uri)


@pytest.mark.slow
def test_run_summary_json_and_exit_codes(tmp_path):
    """The summary names every partial or failed capture with its reason and the wall time, also as
    JSON for schedulers; partial captures fail the run only with --fail-on partial."""
    partial = SAMPLES / "crafted" / "truncated_gzip.pcap.gz"
    base = [sys.executable, "-m", "amqpcap", "run", "--input", str(SAMPLES / "heartbeats.pcap"), str(partial),
            "--master", "local[2]", "--lake", str(tmp_path / "lake")]
    first = subprocess.run([*base, "--summary-json", str(tmp_path / "s.json")], capture_output=True, text=True,
                           cwd=ROOT, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["status"] == {"ok": 1, "partial": 1}
    assert summary["partial"] == [f"{uri(partial)}: the last record holds 24 of its 54 bytes (a capture cut "
                                  "while being written?)"]
    assert summary["wall_seconds"] > 0 and set(summary["phases"]) == {"read", "decode", "message_flows", "commit"}
    assert "partial: " in first.stdout and "WARN" not in first.stderr and "[Stage" not in first.stderr
    strict = subprocess.run([*base, "--fail-on", "partial"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert strict.returncode == 1


def test_a_file_read_in_byte_ranges_gives_the_same_tables(spark, settings, tmp_path):
    """Big files are read by several tasks (job.split_bytes); the tables do not change."""
    capture = SAMPLES / "large_and_pipelined.pcap"  # 600 KB: 7 ranges of 90 KB
    whole, split = str(tmp_path / "whole"), str(tmp_path / "split")
    run(spark, list_inputs([str(capture)]), settings, whole, "w")
    ranged = settings.replace(job={"split_bytes": 90_000})
    summary = run(spark, list_inputs([str(capture)]), ranged, split, "s")
    assert summary.status == {"ok": 1}
    for table in ALL:
        drop = ("run_id", "fingerprint") if table == "captures" else ("run_id",)
        assert rows_of(spark, split, table, drop) == rows_of(spark, whole, table, drop), table
    from amqpcap.job.plan import plan_units
    assert len(plan_units(list_inputs([str(capture)]), 90_000)) == 7
