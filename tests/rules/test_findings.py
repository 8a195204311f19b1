"""The findings table on real captures: each sample recorded for a finding gives it, with the
numbers its notes (the recorder's, from the client side) and the tables say; the healthy samples
give no warning or error; and every finding's numbers are recomputed from the tables it came from."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from amqpcap.rules.findings import KINDS
from amqpcap.settings import Settings
from tests.helpers.samples import SAMPLES
from tests.helpers.tabulated import tabulate

LIMITS = Settings().findings
# Steady traffic of well-behaved clients: nothing here needs anyone's attention (the other samples
# were recorded to show errors, returns, TLS without keys, or declare transient non-exclusive queues,
# which RabbitMQ 4.3 refuses).
HEALTHY = ("concurrent.pcap", "steady_small_frames.pcap", "long_connection.pcap.gz", "kombu_gzip.pcap.gz", "bunny_ruby.pcap", "heartbeats.pcap",
           "channels_qos_get.pcap", "large_and_pipelined.pcap", "ipv6_pcapng.pcapng", "mid_stream.pcap",
           "abrupt_kill.pcap", "protocol_headers.pcap", "other_protocols.pcap")


def tables_of(name: str) -> dict[str, list[dict]]:
    return tabulate([str(SAMPLES / name)])


def notes(name: str) -> dict:
    return json.loads((SAMPLES / f"{name.split('.')[0]}.expected.json").read_text())["facts"]


def findings(tables: dict, kind: str) -> list[dict]:
    return [f for f in tables.get("findings", []) if f["kind"] == kind]


def evidence(finding: dict) -> dict:
    return json.loads(finding["evidence_json"] or "{}")


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_traffic_is_quiet(name):
    loud = [(f["kind"], f["summary"]) for f in tables_of(name).get("findings", []) if f["severity"] != "info"]
    assert loud == []


def test_consumer_ack_timeout_names_the_consumer_the_delivery_and_the_close():
    facts = notes("consumer_ack_timeout")
    tables = tables_of("consumer_ack_timeout.pcap")
    [finding] = findings(tables, "consumer-ack-timeout")
    held = next(d for d in facts["deliveries"] if d["message_id"] == facts["held_unacked"])
    assert finding["severity"] == "error" and finding["queue"] == facts["queue"]
    assert finding["channel"] == facts["broker_channel_close"]["channel"]
    assert evidence(finding)["delivery_tags"] == [held["delivery_tag"]]
    assert evidence(finding)["message_ids"] == [facts["held_unacked"]]
    assert finding["threshold"] == facts["consumer_timeout_ms"] / 1000
    assert finding["value"] == pytest.approx(facts["seconds_from_held_delivery_to_close"], abs=0.05)
    [close] = [e for e in tables["errors"] if e["reply_code"] == 406]
    assert finding["last_ns"] == close["ts_ns"]
    [delivery] = [d for d in tables["deliveries"] if d["message_id"] == held["message_id"] and not d["redelivered"]]
    assert finding["value"] == delivery["settle_latency_ms"] / 1000 and delivery["outcome"] == "channel-closed"
    assert finding["consumer_tag"] == delivery["consumer_tag"]
    assert "held delivery 3 for 4.0 s; the broker closed channel 1: 406 PRECONDITION_FAILED" in finding["summary"]
    assert findings(tables, "channel-error") == []  # (the close is this finding, not a second one)


def test_redelivery_loop_counts_the_redeliveries_and_follows_the_message_to_its_dead_letter_queue():
    tables = tables_of("quorum_delivery_limit.pcap")
    [finding] = findings(tables, "redelivery-loop")
    redelivered = [d for d in tables["deliveries"] if d["message_id"] == "poison-1" and d["redelivered"]]
    assert finding["count"] == len(redelivered) == 3 and finding["threshold"] == LIMITS.redeliveries
    assert evidence(finding)["delivery_tags"] == [d["delivery_tag"] for d in redelivered]
    assert finding["queue"] == "amqpcap.poison.qq"
    assert "dead-lettered (delivery_limit) and delivered from queue amqpcap.poison.dead" in finding["summary"]


def test_connection_churn_is_one_finding_for_the_client_host():
    facts = notes("php_short_lived")
    tables = tables_of("php_short_lived.pcap")
    [finding] = findings(tables, "connection-churn")
    assert finding["client"] == "127.0.0.1" and finding["connection"] is None
    assert finding["count"] == finding["value"] == facts["connections"] == len(tables["connections"])
    assert finding["threshold"] == LIMITS.connections_per_minute
    assert set(evidence(finding)["connections"]) <= {c["connection"] for c in tables["connections"]}


def test_channel_churn_counts_the_opens_in_the_busiest_minute():
    facts = notes("channel_churn")
    tables = tables_of("channel_churn.pcap")
    [finding] = findings(tables, "channel-churn")
    opened = sorted(c["opened_at"] for c in tables["channels"] if c["opened_at"] is not None)
    assert finding["count"] == len(opened) == facts["channels_opened_total"]
    peak = max(sum(1 for t in opened if start <= t < start + 60_000_000) for start in opened)
    assert finding["value"] == peak and finding["unit"] == "per-minute"


def test_deprecated_features_are_named_per_client_with_their_frames():
    tables = tables_of("deprecated_features.pcap")
    found = {json.loads(f["evidence_json"])["frames"][0]: f for f in findings(tables, "deprecated-feature")}
    qos = [r for r in tables["frames"] if r["method"] == "basic.qos" and r["qos_global"]]
    declares = [r for r in tables["frames"] if r["method"] == "queue.declare" and r["direction"] == "C>S"
                and not r["durable"] and not r["exclusive"] and not r["passive"]]
    assert sorted(found) == sorted(r["pcap_record"] for r in qos + declares)
    assert all(f["summary"].startswith("Pika Python Client Library 1.4.4 uses") for f in found.values())
    assert "global_qos" in found[qos[0]["pcap_record"]]["summary"]
    assert found[declares[0]["pcap_record"]]["queue"] == "amqpcap.transient.nonexclusive"


def test_blocked_publisher_says_why_how_long_and_what_waited():
    tables = tables_of("blocked_publisher.pcap")
    [finding] = findings(tables, "publisher-blocked")
    [blocked] = [r for r in tables["flow_control"] if r["mechanism"] == "connection.blocked"]
    assert finding["value"] == blocked["duration_ms"] / 1000 and blocked["reason"] == "low on memory"
    held = [p for p in tables["publishes"] if blocked["started_at"] * 1000 <= p["published_ns"]
            and p["published_ns"] < blocked["ended_at"] * 1000]
    assert len(held) == 2 and "(low on memory)" in finding["summary"] and "2 publishes sent while blocked" \
        in finding["summary"]
    assert findings(tables, "capture-loss") == []  # (its retransmission is no loss)


def test_unroutable_groups_the_returned_publishes_by_exchange_and_routing_key():
    facts = notes("unroutable_mandatory")
    tables = tables_of("unroutable_mandatory.pcap")
    got = {(f["exchange"], f["routing_key"]): f["count"] for f in findings(tables, "unroutable")}
    want = Counter((facts["exchange"]["name"], p["routing_key"]) for p in facts["publishes"]
                   if p["mandatory"] and p["routing_key"] != facts["binding_key"])
    assert got == dict(want)


def all_tables() -> dict[str, list[dict]]:
    return tabulate([str(p) for p in sorted(SAMPLES.rglob("*.pcap*"))])


@pytest.fixture(scope="module")
def samples():
    return all_tables()


def test_every_finding_agrees_with_the_tables_it_came_from(samples):
    rows = samples["findings"]
    assert {f["kind"] for f in rows} >= {"consumer-ack-timeout", "redelivery-loop", "unroutable", "publish-nacked",
                                         "publisher-blocked", "connection-churn", "channel-churn", "channel-error",
                                         "connection-error", "deprecated-feature"}
    records = {(r["capture"], r["pcap_record"]) for r in samples["frames"]}
    for f in rows:
        assert f["kind"] in KINDS and f["severity"] in ("info", "warning", "error") and f["summary"]
        for frame in evidence(f).get("frames", []):
            assert (f["capture"], frame) in records, f
        of = [r for r in samples.get(TABLE_OF.get(f["kind"], ""), []) if r.get("connection") == f["connection"]]
        check = CHECKS.get(f["kind"])
        if check is not None:
            check(f, of)


def _unroutable(f, publishes):
    assert f["count"] == sum(1 for p in publishes if p["returned"] and p["exchange"] == f["exchange"]
                             and p["routing_key"] == f["routing_key"])


def _nacked(f, publishes):
    assert f["count"] == sum(1 for p in publishes if p["confirm_outcome"] == "nack" and p["exchange"] == f["exchange"]
                             and p["routing_key"] == f["routing_key"])


def _closes(f, errors):
    scope = f["kind"].split("-")[0]
    times = sorted(e["ts_ns"] for e in errors if e["scope"] == scope and e["method"].endswith(".close")
                   and f"with {e['reply_code']}" in f["summary"])
    assert f["count"] <= len(times) and f["first_ns"] in times and f["last_ns"] in times


def _flow(f, flow):
    durations = [r["duration_ms"] / 1000 for r in flow if r["duration_ms"] is not None]
    assert f["value"] == (max(durations) if durations else None)


def _tls(f, tls):
    assert [r for r in tls if not r["decrypted"]]


TABLE_OF = {"unroutable": "publishes", "publish-nacked": "publishes", "channel-error": "errors",
            "connection-error": "errors", "publisher-blocked": "flow_control", "flow-stopped": "flow_control",
            "tls-not-decoded": "tls_connections"}
CHECKS = {"unroutable": _unroutable, "publish-nacked": _nacked, "channel-error": _closes, "connection-error": _closes,
          "publisher-blocked": _flow, "flow-stopped": _flow, "tls-not-decoded": _tls}


def tabulated_with(name: str, **limits) -> dict[str, list[dict]]:
    """A sample's tables with some [findings] limits lowered (the samples' traffic is small)."""
    from collections import defaultdict

    from amqpcap.connection.decoder import CaptureDecoder
    from amqpcap.onepass.tabulate import Tabulator
    settings = Settings().replace(findings=limits)
    tables: dict = defaultdict(list)
    tabulator = Tabulator.for_settings(lambda table, row: tables[table.name].append(
        row if type(row) is dict else dict(row)), settings)
    for record in CaptureDecoder(settings).decode([str(SAMPLES / name)], ends=True):
        tabulator.record(record)
    return tables


def test_missed_heartbeats_are_silences_longer_than_the_limit_without_a_timeout():
    tables = tabulated_with("heartbeats.pcap", missed_heartbeat_intervals=0.5)
    got = findings(tables, "missed-heartbeats")
    assert got and not findings(tables, "heartbeat-timeout")
    for finding in got:
        [row] = [h for h in tables["heartbeats"] if h["connection"] == finding["connection"]
                 and finding["summary"].startswith("the client" if h["direction"] == "C>S" else "the broker")]
        assert finding["threshold"] == 0.5 * row["heartbeat_s"] and not row["ended_after_silence"]
        assert finding["threshold"] < finding["value"] <= row["longest_silence_s"] and finding["count"] >= 1


def test_large_messages_by_exchange_and_routing_key_and_by_queue():
    tables = tabulated_with("large_and_pipelined.pcap", large_message_bytes=100_000)
    got = findings(tables, "large-message")
    big = [p for p in tables["publishes"] if (p["body_size"] or 0) >= 100_000]
    assert big and sum(f["count"] for f in got if f["exchange"] is not None or f["routing_key"] is not None) \
        == len(big)
    assert max(f["value"] for f in got) == max(p["body_size"] for p in big) == 300_000
    assert all(f["severity"] == "info" for f in got)


def test_slow_rpc_names_the_request_and_its_latency():
    tables = tabulated_with("channel_errors.pcap", slow_rpc_ms=0.001)
    got = findings(tables, "slow-rpc")
    calls = [c for c in tables["rpc_calls"] if c["requester"] == "client" and (c["latency_ms"] or 0) > 0.001]
    assert got and sum(f["count"] for f in got) == len(calls)
    for finding in got:
        request = finding["summary"].split(" to answer ")[1].split(" ")[0]
        assert finding["value"] == max(c["latency_ms"] for c in calls if c["request"] == request
                                       and c["connection"] == finding["connection"])


def test_unbounded_prefetch_and_slow_consumer():
    tables = tabulated_with("consumer_ack_timeout.pcap", slow_consumer_p99_ms=0.001)
    [slow] = findings(tables, "slow-consumer")  # prefetch 3, all 3 outstanding: the consumer is the bottleneck
    acked = sorted(d["settle_latency_ms"] for d in tables["deliveries"] if d["outcome"] == "ack"
                   and d["consumer_tag"] == slow["consumer_tag"])
    assert slow["value"] == acked[-1] and slow["count"] == len(acked) and "of its prefetch 3" in slow["summary"]
    tables = tabulated_with("large_and_pipelined.pcap", unbounded_outstanding=1)
    assert not findings(tables, "unbounded-prefetch")  # (its consumer is no_ack: nothing outstanding)
    tables = tabulated_with("confirms.pcap", unbounded_outstanding=1)
    for finding in findings(tables, "unbounded-prefetch"):
        qos = [f for f in tables["frames"] if f["method"] == "basic.qos" and f["connection"] == finding["connection"]
               and f["channel"] == finding["channel"] and f["prefetch_count"]]
        assert not qos and finding["value"] >= 1


def test_names_the_traffic_chooses_do_not_grow_a_connection_s_findings():
    """Unroutable publishes to ever new routing keys: the first GROUPS keys each a finding, the
    rest one "(others)" finding, every return counted."""
    from amqpcap.rules.findings.finding import GROUPS, OTHERS
    from amqpcap.rules.findings.publishers import Returns
    returns = Returns()

    class Published(dict):
        __getattr__ = dict.get
    where = {"connection": "c", "capture": "x", "client": "a:1", "server": "b:2"}
    for n in range(GROUPS + 100):
        returns.row("publishes", Published(where, returned=True, exchange="e", routing_key=f"k{n}", return_code=312,
                                           return_text="NO_ROUTE", published_ns=n, channel=1, message_key=f"m{n}"),
                    None)
    found = list(returns.findings(None))
    assert len(found) == GROUPS + 1 and sum(f.count for f, _ in found) == GROUPS + 100
    (others,) = [f for f, _ in found if f.about[1] == OTHERS]
    assert others.count == 100 and others.routing_key is None and others.exchange is None


def test_a_damaged_capture_file_is_one_capture_loss_finding():
    tables = tabulate([str(SAMPLES / "crafted" / "truncated_gzip.pcap.gz")])
    [finding] = [f for f in findings(tables, "capture-loss") if f["connection"] is None]
    damage = [i for i in tables["decode_issues"] if i["connection"] is None]
    assert damage and finding["count"] == len(damage) and finding["source"] == finding["capture"]
    assert finding["value"] == sum(i["bytes_skipped"] or 0 for i in damage)
    assert evidence(finding)["file_offsets"] == [i["file_offset"] for i in damage][:20]


def pcapng_with_statistics(path, source, ifdrop: int, osdrop: int) -> None:
    """`source`'s packets as a pcapng file whose interface statistics (an ISB at its end, as dumpcap
    writes) say `ifdrop` + `osdrop` packets were dropped."""
    import struct

    from amqpcap.capture.readers import read_records

    def block(kind: int, body: bytes) -> bytes:
        body += b"\0" * (-len(body) % 4)
        return struct.pack("<II", kind, len(body) + 12) + body + struct.pack("<I", len(body) + 12)
    out = [block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)),
           block(1, struct.pack("<HHI", 1, 0, 262144))]
    last = 0
    for ts, _, data in read_records(str(source)):
        micros = ts // 1000
        out.append(block(6, struct.pack("<IIIII", 0, micros >> 32, micros & 0xFFFFFFFF, len(data), len(data)) + data))
        last = micros
    options = struct.pack("<HHQ", 5, 8, ifdrop) + struct.pack("<HHQ", 7, 8, osdrop) + struct.pack("<HH", 0, 0)
    out.append(block(5, struct.pack("<III", 0, last >> 32, last & 0xFFFFFFFF) + options))
    path.write_bytes(b"".join(out))


def test_the_drops_a_pcapng_file_records_are_capture_loss(tmp_path, capfdbinary):
    from amqpcap.capture.readers import read_records
    from amqpcap.capture.readers.info import CaptureInfo
    from amqpcap.cli import main
    capture = tmp_path / "dropped.pcapng"
    pcapng_with_statistics(capture, SAMPLES / "heartbeats.pcap", ifdrop=40, osdrop=2)
    info = CaptureInfo(str(capture), capture.stat().st_size)
    packets = sum(1 for _ in read_records(str(capture), info))
    assert info.dropped == 42 and info.records == packets and not info.issues
    assert main(["decode", "--findings", "--json", str(capture)]) == 0
    listed = json.loads(capfdbinary.readouterr()[0])
    [loss] = [f for f in listed if f["kind"] == "capture-loss"]
    assert loss["value"] == 42 and loss["unit"] == "packets" and "dropped 42 packets" in loss["summary"]
    pcapng_with_statistics(capture, SAMPLES / "heartbeats.pcap", ifdrop=0, osdrop=0)
    info = CaptureInfo(str(capture), capture.stat().st_size)
    list(read_records(str(capture), info))
    assert info.dropped == 0
