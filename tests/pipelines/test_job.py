"""The Spark job end to end on data/samples: every table against the samples' known facts, reruns,
a corrupt file among good ones, rotated files, and a run on a local cluster."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections import Counter

import pytest

from pipelines.inputs import list_inputs
from pipelines.jobs.nightly import run
from pipelines.lake import read_table
from tests.capture.conftest import EXPECTED, SAMPLES, capture_for
from tests.conftest import ROOT

RECORDED = [p for p in EXPECTED if p.parent.name != "crafted"]


def test_every_sample_lands_with_its_known_facts(spark, lake):
    path, summary = lake
    assert summary["versions"] == {"captures": 0, "frames": 0, "messages": 0, "decode_issues": 0, "streams": 0,
                                   "errors": 0, "deliveries": 0, "publishes": 0, "rpc_calls": 0,
                                   "connections": 0, "channels": 0, "heartbeats": 0, "flow_control": 0,
                                   "message_flows": 0}
    frames = read_table(spark, path, "frames").where("kind = 'method'").groupBy(
        "capture", "direction", "method").count().collect()
    counted = Counter({(r.capture, r.direction, r.method): r["count"] for r in frames})
    for expected_path in EXPECTED:
        expected = json.loads(expected_path.read_text())
        capture = str(capture_for(expected_path))
        for direction in ("C>S", "S>C"):
            want = Counter(expected["methods"][direction]) - Counter(
                expected.get("not_decodable", {}).get(direction, {}))
            got = Counter({m: n for (c, d, m), n in counted.items() if c == capture and d == direction})
            assert got == want, (expected_path.name, direction)


def test_messages_and_issues_tables(spark, lake):
    path, _ = lake
    messages = read_table(spark, path, "messages")
    for expected_path in RECORDED:
        expected = json.loads(expected_path.read_text())
        capture = str(capture_for(expected_path))
        mine = messages.where(messages.capture == capture)
        assert mine.where("method = 'basic.publish'").count() == expected["messages"]["published"]
        assert mine.where("method = 'basic.return'").count() == expected["messages"]["returned"]
    issues = read_table(spark, path, "decode_issues")
    skipped = {r.capture: r.skipped for r in issues.groupBy("capture").agg({"bytes_skipped": "sum"})
               .withColumnRenamed("sum(bytes_skipped)", "skipped").collect()}
    for expected_path in EXPECTED:
        expected = json.loads(expected_path.read_text())
        if "bytes_skipped" in expected:
            assert skipped.get(str(capture_for(expected_path)), 0) == sum(expected["bytes_skipped"].values())


def test_captures_table(spark, lake):
    path, _ = lake
    captures = {r.path: r for r in read_table(spark, path, "captures").collect()}
    assert len(captures) == len(EXPECTED)
    gz = captures[str(SAMPLES / "crafted" / "truncated_gzip.pcap.gz")]
    assert (gz.status, gz.error) == ("partial", "the last record holds 24 of its 54 bytes (a capture cut "
                                                "while being written?)")
    assert captures[str(SAMPLES / "concurrent.pcap")].link_types == ["LINUX_SLL2"]
    assert all(r.packets > 0 and r.first_ts <= r.last_ts for r in captures.values())


def test_rerun_replaces_never_duplicates(spark, config, tmp_path):
    path = str(tmp_path / "lake")
    files = list_inputs([str(SAMPLES / "returns_nack_reject.pcap"), str(SAMPLES / "heartbeats.pcap")])
    first = run(spark, files, config, path, "run-a")
    before = sorted(tuple(r) for r in read_table(spark, path, "frames").drop("run_id").collect())
    second = run(spark, files, config, path, "run-b")
    after = read_table(spark, path, "frames")
    assert second["versions"] == {name: v + 1 for name, v in first["versions"].items()}
    assert sorted(tuple(r) for r in after.drop("run_id").collect()) == before
    assert {r.run_id for r in after.select("run_id").distinct().collect()} == {"run-b"}
    # another day's capture leaves the first ones untouched
    run(spark, list_inputs([str(SAMPLES / "confirms.pcap")]), config, path, "run-c")
    assert read_table(spark, path, "frames").where("run_id = 'run-b'").count() == len(before)


def test_a_corrupt_file_fails_alone(spark, config, tmp_path):
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"\x00" * 1000)
    path = str(tmp_path / "lake")
    files = list_inputs([str(SAMPLES / "heartbeats.pcap"), str(junk), str(tmp_path / "missing.pcap")])
    summary = run(spark, files, config, path, "run-x")
    assert len(summary["failed"]) == 2
    status = {r.path: (r.status, r.error) for r in read_table(spark, path, "captures").collect()}
    assert status[str(junk)][0] == "failed" and "not a pcap" in status[str(junk)][1]
    assert status[str(tmp_path / "missing.pcap")] == ("failed", "no such file")
    heartbeats = read_table(spark, path, "frames").where("kind = 'heartbeat'").count()
    assert heartbeats >= 4


def test_rotated_files_give_the_same_tables(spark, config, tmp_path):
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
    run(spark, list_inputs([str(SAMPLES / "large_and_pipelined.pcap")]), config, whole, "w")
    run(spark, list_inputs([str(folder)]), config, split, "s")
    columns = ["connection", "direction", "stream_offset", "kind", "method", "args_json", "ts_ns"]
    rows = lambda lake: sorted(tuple(r) for r in read_table(spark, lake, "frames").select(*columns).collect())
    assert rows(split) == rows(whole)


def test_local_cluster_run(tmp_path):
    """Executors in separate JVMs and Python workers: nothing may depend on driver state."""
    lake = tmp_path / "lake"
    result = subprocess.run([sys.executable, "-m", "pipelines.jobs.nightly", "--input",
                             str(SAMPLES / "channels_qos_get.pcap"), "--lake", str(lake),
                             "--master", "local-cluster[2,1,1024]"], capture_output=True, text=True,
                            cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "1 ok, 0 partial, 0 failed" in result.stdout


def test_a_failed_commit_leaves_no_partial_run(spark, config, tmp_path, monkeypatch):
    from pipelines import lake as delta
    path = str(tmp_path / "lake")
    files = list_inputs([str(SAMPLES / "heartbeats.pcap")])
    first = run(spark, files, config, path, "good")
    real = delta.commit

    def failing(lake, table, *args):
        if table.name == "messages":
            raise RuntimeError("storage went away")
        return real(lake, table, *args)
    monkeypatch.setattr(delta, "commit", failing)
    with pytest.raises(RuntimeError, match="storage went away"):
        run(spark, files, config, path, "bad")
    frames = read_table(spark, path, "frames")
    assert {r.run_id for r in frames.select("run_id").distinct().collect()} == {"good"}
    assert frames.count() == first["rows"]["frames"]


def test_errors_table_holds_every_known_error(spark, lake):
    path, summary = lake
    assert summary["versions"]["errors"] == 0
    table = read_table(spark, path, "errors")
    for expected_path in RECORDED:
        expected = json.loads(expected_path.read_text())
        mine = table.where(table.capture == str(capture_for(expected_path)))
        codes = expected["reply_codes"]
        want = sorted(c for c in codes["connection.close"] + codes["channel.close"] if c not in (0, 200))
        got = sorted(r.reply_code for r in mine.where("method like '%.close'").collect())
        assert got == want, expected_path.name
        assert sorted(r.reply_code for r in mine.where("method = 'basic.return'").collect()) == \
            sorted(codes["basic.return"])
        assert mine.where("method = 'basic.nack'").count() == expected["messages"]["confirm_nacks"]
    assert table.where("reply_code = 404 and reply_name is null").count() == 0


def test_analyze_rebuilds_the_analytics_tables(spark, lake):
    from pipelines.jobs.analyze import analyze
    path, _ = lake
    before = sorted(tuple(r) for r in read_table(spark, path, "errors").drop("run_id").collect())
    versions = analyze(spark, path, "rebuild")
    assert versions == {"errors": 1, "deliveries": 1, "publishes": 1, "rpc_calls": 1, "connections": 1,
                        "channels": 1, "heartbeats": 1, "flow_control": 1, "message_flows": 1}
    after = read_table(spark, path, "errors")
    assert sorted(tuple(r) for r in after.drop("run_id").collect()) == before
    assert {r.run_id for r in after.select("run_id").distinct().collect()} == {"rebuild"}


def test_deliveries_table_settles_as_the_samples_did(spark, lake):
    path, _ = lake
    table = read_table(spark, path, "deliveries")
    for expected_path in RECORDED:
        facts = json.loads(expected_path.read_text())["messages"]
        mine = [r for r in table.where(table.capture == str(capture_for(expected_path))).collect()]
        outcomes = Counter(r.outcome for r in mine)
        assert len(mine) == facts["delivered"] + facts["get_ok"], expected_path.name
        assert (outcomes["ack"], outcomes["nack"], outcomes["reject"]) == \
            (facts["acked"], facts["nacked"], facts["rejected"]), expected_path.name
        assert sum(bool(r.requeue) for r in mine) == facts["requeued"]
        assert sum(bool(r.redelivered) for r in mine) == facts["redelivered"]
        assert all(r.settle_latency_ms >= 0 for r in mine if r.settle_latency_ms is not None)
        if expected_path.name == "abrupt_kill.expected.json":
            # the killed client never acked its get-ok; its TCP end (no close method) settles it
            streams = read_table(spark, path, "streams").where(f"capture = '{capture_for(expected_path)}'")
            end = streams.where("status = 'amqp'").collect()[0]
            assert end.end_reason in ("fin", "rst")
            assert [(r.outcome, r.settled_at) for r in mine] == [("connection-closed", end.last_ts)]


def test_publishes_table_confirms_as_the_samples_did(spark, lake):
    path, _ = lake
    table = read_table(spark, path, "publishes")
    for expected_path in RECORDED:
        facts = json.loads(expected_path.read_text())["messages"]
        mine = [r for r in table.where(table.capture == str(capture_for(expected_path))).collect()]
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
        mine = [r for r in table.where(table.capture == str(capture_for(expected_path))).collect()]
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
        mine = [r for r in table.where(table.capture == str(capture_for(expected_path))).collect()]
        amqp = [r for r in mine if r.status == "amqp"]
        assert len(amqp) == expected["connections"], expected_path.name
        assert any(not r.syn_seen for r in amqp) == expected["capture"]["starts_mid_stream"]
        for r in amqp:
            assert r.c2s_stream_bytes == r.c2s_decoded_bytes + r.c2s_skipped_bytes
            assert r.s2c_stream_bytes == r.s2c_decoded_bytes + r.s2c_skipped_bytes
            assert r.end_reason in ("fin", "rst", "capture-end", "port-reuse")


def test_connections_table(spark, lake):
    path, _ = lake
    table = read_table(spark, path, "connections")
    for expected_path in RECORDED:
        expected = json.loads(expected_path.read_text())
        mine = [r for r in table.where(table.capture == str(capture_for(expected_path))).collect()
                if r.status == "amqp"]
        assert len(mine) == expected["connections"], expected_path.name
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
        mine = beats.where(beats.capture == str(capture_for(expected_path))).collect()
        for direction, minimum in expected["heartbeats_min"].items():
            assert sum(r.heartbeats for r in mine if r.direction == direction) >= minimum, expected_path.name
    flows = read_table(spark, path, "flow_control").collect()
    # connection_errors: a client's channel.flow active=false, answered by a 540 connection close
    assert [(r.mechanism, r.initiator, r.ended_at) for r in flows] == [("channel.flow", "client", None)]


def test_channels_table(spark, lake):
    path, _ = lake
    table = read_table(spark, path, "channels")
    for expected_path in RECORDED:
        expected = json.loads(expected_path.read_text())
        methods, facts = expected["methods"], expected["messages"]
        mine = table.where(table.capture == str(capture_for(expected_path))).collect()
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
        capture = str(capture_for(expected_path))
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
        capture = str(capture_for(expected_path))
        multiple = frames.where((frames.capture == capture) & (frames.method == "basic.ack") &
                                (frames.direction == "C>S") & frames.multiple).count()
        assert multiple == facts["acked_multiple_frames"], expected_path.name
        empty = calls.where((calls.capture == capture) & (calls.reply == "basic.get-empty")).count()
        assert empty == facts["get_empty"], expected_path.name
