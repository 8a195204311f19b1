"""Connections carried between nightly runs, end to end through the job and the lake (issue 11):
the long recorded connection of data/samples cut into three nights, the first cut inside a large
body frame with a publish unconfirmed and a delivery unacked, the third night seeing its close.

Three runs (one per night) give the tables one run over the whole capture gives; rerunning any
night, or two in either order, changes nothing; a state that does not fit is not resumed, and says
so. The Spark-free side of the same story: tests/onepass/test_carry.py."""

from __future__ import annotations

import pytest

from amqpcap.capture.inputs import list_inputs
from amqpcap.job.nightly import run
from amqpcap.lake.spark_read import read_table
from amqpcap.tables.registry import CONNECTION_TABLES, DECODE_ISSUES, FRAMES, MESSAGES, STREAMS
from tests.onepass.test_carry import FACTS, write_nights

# what a row says about where it came from differs between the two lakes, nothing else
UNNAMED = ("run_id", "capture", "source", "pcap_record", "pcap_record_last", "tcp_stream")
PER_CONNECTION = [t.name for t in (FRAMES, MESSAGES, DECODE_ISSUES, STREAMS) + CONNECTION_TABLES]


def rows(spark, lake: str, table: str) -> list[tuple]:
    return sorted((tuple(r) for r in read_table(spark, lake, table).drop(*UNNAMED).collect()), key=repr)


def lake_rows(spark, lake: str) -> dict[str, list[tuple]]:
    return {table: rows(spark, lake, table) for table in PER_CONNECTION + ["message_flows"]}


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    return write_nights(tmp_path_factory.mktemp("nights"))


@pytest.fixture(scope="module")
def whole(spark, settings, tmp_path_factory):
    (path,) = write_nights(tmp_path_factory.mktemp("whole"), cuts=[])
    lake = str(tmp_path_factory.mktemp("whole-lake"))
    run(spark, list_inputs([path]), settings, lake, "whole")
    return lake_rows(spark, lake)


@pytest.fixture(scope="module")
def nightly(spark, settings, nights, tmp_path_factory):
    lake = str(tmp_path_factory.mktemp("nightly-lake"))
    summaries = [run(spark, list_inputs([night]), settings, lake, f"night{n}") for n, night in enumerate(nights)]
    return lake, summaries


def test_three_nightly_runs_give_the_tables_of_one_run(spark, whole, nightly):
    lake, summaries = nightly
    assert [(s.carried_in, s.resumed, s.carried_out) for s in summaries] == [(0, 0, 1), (1, 1, 1), (1, 1, 0)]
    got = lake_rows(spark, lake)
    for table in PER_CONNECTION:
        assert got[table] == whole[table], table
    assert read_table(spark, lake, "frames").select("connection").distinct().count() == 1
    (connection,) = read_table(spark, lake, "connections").collect()
    assert connection.end_reason == "close" and not connection.provisional
    publishes = read_table(spark, lake, "publishes")
    assert publishes.count() == FACTS["messages"]["published"]
    assert publishes.where("confirm_outcome = 'ack' and confirm_latency_ms is not null").count() == publishes.count()
    deliveries = read_table(spark, lake, "deliveries")
    assert deliveries.where("queue is null").count() == 0
    for table in PER_CONNECTION + ["message_flows"]:
        assert read_table(spark, lake, table).where("provisional").count() == 0, table


def test_frames_are_numbered_within_each_nights_file(spark, nightly, tmp_path):
    """pcap_record is the record number in the night's own file, also for the frames of a
    connection resumed from the night before, and for the frame cut by the night's end."""
    from amqpcap.connection.decoder import CaptureDecoder
    lake, _ = nightly
    (path,) = write_nights(tmp_path, cuts=[])
    whole = {(r["dir"], r["offset"]): r["pcap_record"] for r in CaptureDecoder().decode([path]) if r["kind"] != "issue"}
    earlier, before = 0, {}
    for capture in sorted(read_table(spark, lake, "captures").collect(), key=lambda c: c.first_ts):
        before[capture.path], earlier = earlier, earlier + capture.packets
    frames = read_table(spark, lake, "frames").collect()
    assert len(frames) == len(whole) and len({f.capture for f in frames}) == 3
    assert all(f.pcap_record + before[f.capture] == whole[(f.direction, f.stream_offset)] for f in frames)
    assert {f.tcp_stream for f in frames} == {0}


def test_message_flows_pair_within_a_run_without_duplicates(spark, whole, nightly):
    """message_flows pairs the publishes and deliveries of one run (docs/state.md): a message whose
    two sides fall in different runs is not paired, and never counted twice."""
    lake, _ = nightly
    flows = read_table(spark, lake, "message_flows")
    keys = flows.where("delivered_at is not null").groupBy("consumer_connection", "consumer_channel",
                                                            "delivery_tag").count()
    assert keys.where("count > 1").count() == 0
    assert flows.where("delivered_at is not null").count() == len([r for r in whole["deliveries"]])
    assert flows.count() >= len(whole["message_flows"])


def test_rerunning_any_night_in_any_order_changes_nothing(spark, settings, nights, nightly, tmp_path):
    import shutil
    lake, _ = nightly
    before = lake_rows(spark, lake)
    copy = str(tmp_path / "lake")
    shutil.copytree(lake, copy)
    for n, order in enumerate([[0], [1], [2], [1, 0], [0, 1], [0, 1, 2]]):
        for night in order:
            summary = run(spark, list_inputs([nights[night]]), settings, copy, f"rerun{n}-{night}")
            assert summary.carried_in == (0 if night == 0 else 1)
        assert lake_rows(spark, copy) == before, order
    # two nights in one run: the same per-connection rows (message_flows pairs within a run, so
    # that run pairs the messages crossing its two nights' boundary)
    both = run(spark, list_inputs(nights[:2]), settings, copy, "rerun-both")
    after = lake_rows(spark, copy)
    assert both.resumed == 0 and all(after[table] == before[table] for table in PER_CONNECTION)
    assert len(after["message_flows"]) <= len(before["message_flows"])


def shifted(path: str, out, by: int = 10 << 20) -> str:
    """The capture with every TCP sequence and ack number moved by `by` bytes: not the saved
    connection's continuation, though on its 4-tuple."""
    from scapy.layers.inet import TCP
    from scapy.utils import rdpcap, wrpcap
    packets = rdpcap(path)
    for packet in packets:
        if TCP in packet:
            packet[TCP].seq = (packet[TCP].seq + by) % 2**32
            packet[TCP].ack = (packet[TCP].ack + by) % 2**32
            del packet[TCP].chksum
    wrpcap(str(out), packets)
    return str(out)


def test_a_state_that_does_not_fit_starts_afresh_and_says_why(spark, settings, nights, tmp_path):
    lake = str(tmp_path / "lake")
    run(spark, list_inputs([nights[0]]), settings, lake, "n0")
    summary = run(spark, list_inputs([shifted(nights[1], tmp_path / "night1.pcap")]), settings, lake, "n1")
    assert (summary.carried_in, summary.resumed) == (1, 0)
    issues = read_table(spark, lake, "decode_issues").where("issue_kind = 'state-not-resumed'").collect()
    assert len(issues) == 1 and "sequence numbers jumped by 10485760 bytes" in issues[0].detail
    assert read_table(spark, lake, "frames").select("connection").distinct().count() == 2
    # night 0's connection as that night ended (nothing superseded it), and night 1's, still open
    assert read_table(spark, lake, "connections").where("provisional").count() == 2
    # another sensor never sees this one's states
    other = settings.replace(state={"sensor": "rack-2"})
    lake2 = str(tmp_path / "lake2")
    run(spark, list_inputs([nights[0]]), settings, lake2, "n0")
    assert run(spark, list_inputs([nights[1]]), other, lake2, "n1").carried_in == 0
