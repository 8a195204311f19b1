"""What is not AMQP 0-9-1 on an AMQP port (issue 51, item 4): AMQP 1.0 (RabbitMQ 4 serves it on
5672) is recognised by its protocol headers, its frames walked by their own header and counted, not
decoded, never framed as 0-9-1 (no framing or resync issue, no 0-9-1 record); another protocol a
client opens with is named by its first bytes and its bytes counted. Recorded samples (a qpid-proton
AMQP 1.0 connection beside a pika one; HTTP, MQTT, STOMP and TLS clients refused by the broker) and
crafted streams (gaps, a lost frame header, a stream cut by the end of a run)."""

from __future__ import annotations

import struct
from collections import Counter, defaultdict

import pytest

from amqpcap.capture.packets import Segment
from amqpcap.onepass.carry import CarryingDecoder
from amqpcap.protocol.other_protocols import name_protocol
from amqpcap.settings import Settings
from tests.fuzz.oracles import check_accounting
from tests.helpers.samples import SAMPLES, decoded

METHOD_KINDS = {"method", "header", "body", "heartbeat"}


def known_connections(sample: str):
    """(facts, stats, [(what the facts say of a connection, its summary, its records)]) of a
    sample whose facts list its connections (`protocols`); every byte of it accounted for."""
    facts, records, stats = decoded(SAMPLES / f"{sample}.expected.json")
    check_accounting(records, stats.connection_summaries)
    summary_of = {int(s["client"].rsplit(":", 1)[1]): s for s in stats.connection_summaries}
    records_of = defaultdict(list)
    for record in records:
        if record["connection"] is not None:
            records_of[int(record["client"].rsplit(":", 1)[1])].append(record)
    return facts, stats, [(known, summary_of[known["client_port"]], records_of[known["client_port"]])
                          for known in facts["protocols"]]


def test_an_amqp_1_0_connection_beside_a_0_9_1_one():
    facts, stats, connections = known_connections("amqp10_mixed")
    for known, summary, own in connections:
        headers = [r["protocol_header"].split(" (")[0] for r in own if r["kind"] == "protocol-header"
                   and r["dir"] == "C>S"]
        assert headers == known["client_headers"]
        if known["protocol"] == "amqp-1.0":
            assert (summary["status"], summary["version"]) == ("amqp-1.0", "1.0")
            assert not [r for r in own if r["kind"] in METHOD_KINDS]
            issues = Counter(r["issue_kind"] for r in own if r["kind"] == "issue")
            assert set(issues) == {"not-decoded"}  # no framing, resync or 0-9-1 issue
            for label, direction in summary["directions"].items():
                assert direction["undecoded_frames"] >= 3, label
                assert direction["decoded_bytes"] == 16  # its two protocol headers, SASL's and AMQP's
            # a run of frames per protocol header: SASL's, then AMQP's
            runs = [r["detail"] for r in own if r["kind"] == "issue" and r["dir"] == "C>S"]
            assert len(runs) == 2 and "SASL" in runs[0] and "AMQP)" in runs[1]
        else:
            assert (summary["status"], summary["version"]) == ("amqp", "0-9-1")
            methods = Counter(r["method"] for r in own if r["kind"] == "method")
            assert methods == Counter({**facts["methods"]["C>S"], **facts["methods"]["S>C"]})
    assert stats.connections == Counter({"amqp": 1, "amqp-1.0": 1})


def test_clients_that_speak_another_protocol_on_the_amqp_port_are_named_and_counted():
    _, _, connections = known_connections("other_protocols")
    for known, summary, own in connections:
        if known["protocol"] == "amqp-0-9-1":
            assert summary["status"] == "amqp" and not [r for r in own if r["kind"] == "issue"]
            continue
        assert summary["status"] == known["protocol"]
        (named,) = [r for r in own if r["kind"] == "issue" and r["issue_kind"] == "not-amqp-header"]
        assert bytes.fromhex(known["client_first_bytes_hex"]).hex(" ") in named["detail"]
        (counted,) = [r for r in own if r["kind"] == "issue" and r["issue_kind"] != "not-amqp-header"]
        assert counted["issue_kind"] == ("tls-not-decoded" if known["protocol"] == "tls" else "not-decoded")
        assert counted["bytes_skipped"] == known["client_bytes"] == summary["directions"]["C>S"]["stream_bytes"]
        (answer,) = [r for r in own if r["kind"] == "protocol-header"]  # the broker's refusal, decoded
        assert (answer["dir"], answer["raw"]) == ("S>C", known["broker_answer_hex"])


@pytest.mark.parametrize("first, status", [
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "http"),
    (b"POST /api/queues HTTP/1.1\r\n", "http"),
    (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "http"),
    (bytes.fromhex("16030102000100") + bytes(20), "tls"),
    (bytes.fromhex("101800044d51545404020000"), "mqtt"),
    (bytes.fromhex("10100006") + b"MQIsdp" + b"\x03\x02", "mqtt"),
    (b"CONNECT\naccept-version:1.2\n\n\x00", "stomp"),
    (b"STOMP\r\naccept-version:1.2\r\n", "stomp"),
    (b"SSH-2.0-OpenSSH_9.2\r\n", "ssh"),
    (b"PROXY TCP4 10.0.0.1 10.0.0.2 5555 5672\r\n", "proxy"),
    (b"\r\n\r\n\x00\r\nQUIT\n\x21\x11", "proxy"),
    (b"*1\r\n$4\r\nPING\r\n", "redis"),
])
def test_protocols_are_named_by_their_first_bytes(first, status):
    assert name_protocol(first)[0] == status


@pytest.mark.parametrize("first", [b"AMQP\x00\x00\x09\x01", b"\x01\x00\x00\x00\x00\x00\x0c", b"GETX", b"\x16\x04",
                                   b"hello world", bytes(8)])
def test_bytes_of_no_known_protocol_are_not_named(first):
    assert name_protocol(first) is None


# -- crafted AMQP 1.0 streams ----------------------------------------------------------------------

CLIENT, SERVER = (bytes([10, 0, 0, 1]), 40000), (bytes([10, 0, 0, 2]), 5672)
T0 = 1_700_000_000 * 10**9


def frame_1_0(body: bytes, frame_type: int = 0, channel: int = 0) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, frame_type, channel) + body


def client_1_0(frames: int = 6, body: int = 300) -> bytes:
    sasl = b"AMQP\x03\x01\x00\x00" + frame_1_0(b"\x00S\x41" + bytes(40), 1)  # (a sasl-init's shape)
    return sasl + b"AMQP\x00\x01\x00\x00" + b"".join(frame_1_0(bytes([n]) * body) for n in range(frames))


def first_amqp_frame(stream: bytes) -> int:
    return stream.index(b"AMQP\x00\x01\x00\x00") + 8


def segments(stream: bytes, pieces: list[tuple[int, int]], syn: bool = True) -> list[Segment]:
    """Client segments of stream[a:b] for each (a, b) (what lies between two pieces is lost)."""
    out = []
    if syn:
        out.append(Segment(T0, *CLIENT, *SERVER, 999, 0, 0x02, b""))
    for n, (a, b) in enumerate(pieces):
        out.append(Segment(T0 + 1000 * (n + 1), *CLIENT, *SERVER, 1000 + a, 1, 0x18, stream[a:b]))
    return out


def walk(stream: bytes, pieces: list[tuple[int, int]]):
    rows = defaultdict(list)
    decoder = CarryingDecoder(Settings(), ["crafted.pcap"], lambda table, row: rows[table.name].append(dict(row)))
    for item in segments(stream, pieces):
        decoder.feed(item, 0)
    decoder.finish(None, "crafted.pcap")
    (streams,) = rows["streams"]
    return rows["decode_issues"], streams, rows["frames"]


def test_a_gap_inside_a_1_0_frame_keeps_walking_and_one_that_hides_a_header_counts_the_rest():
    stream = client_1_0()
    first = first_amqp_frame(stream)  # both headers and the SASL frame are before
    size = 308
    # lost inside the third frame: its header said where the fourth begins
    issues, streams, frames = walk(stream, [(0, first + 2 * size + 20), (first + 2 * size + 120, len(stream))])
    kinds = [(i["issue_kind"], i["bytes_skipped"]) for i in issues]
    assert ("gap", 100) in kinds and not any(k in ("resync", "framing") for k, _ in kinds)
    assert streams["c2s_undecoded_frames"] == 7  # (the SASL frame and six AMQP frames)
    assert streams["c2s_decoded_bytes"] + streams["c2s_skipped_bytes"] == streams["c2s_stream_bytes"] == len(stream)
    assert [f["kind"] for f in frames] == ["protocol-header", "protocol-header"]
    # lost across the fourth frame's header: where the fifth begins is unknown
    issues, streams, _ = walk(stream, [(0, first + 3 * size - 4), (first + 3 * size + 30, len(stream))])
    assert streams["c2s_undecoded_frames"] == 4
    assert any("framing lost" in i["detail"] for i in issues)
    assert streams["c2s_decoded_bytes"] + streams["c2s_skipped_bytes"] == streams["c2s_stream_bytes"] == len(stream)


def test_a_1_0_frame_header_that_cannot_be_counts_the_rest_of_the_direction():
    stream = client_1_0(frames=2) + struct.pack(">IBBH", 4, 2, 0, 0) + bytes(100)  # a size below the header's
    issues, streams, _ = walk(stream, [(0, len(stream))])
    assert [i["issue_kind"] for i in issues] == ["not-decoded", "not-decoded", "not-decoded"]
    assert "framing lost" in issues[-1]["detail"] and issues[-1]["bytes_skipped"] == 108
    assert streams["status"] == "amqp-1.0"


def test_a_1_0_connection_cut_by_the_end_of_a_run_walks_on_in_the_next():
    stream = client_1_0()
    cut = first_amqp_frame(stream) + 308 + 100  # inside the second AMQP frame
    rows = [defaultdict(list), defaultdict(list)]
    first = CarryingDecoder(Settings(), ["a.pcap"], lambda table, row: rows[0][table.name].append(dict(row)))
    for item in segments(stream, [(0, cut)]):
        first.feed(item, 0)
    (state,) = first.finish(T0 + 10**6, "a.pcap")
    second = CarryingDecoder(Settings(), ["b.pcap"], lambda table, row: rows[1][table.name].append(dict(row)),
                             saved=[state])
    for item in segments(stream, [(cut, len(stream))], syn=False):
        item.ts_ns += 10**9
        second.feed(item, 0)
    second.finish(None, "b.pcap")
    assert second.resumed
    (streams,) = rows[1]["streams"]
    assert (streams["status"], streams["version"], streams["c2s_undecoded_frames"]) == ("amqp-1.0", "1.0", 7)
    assert streams["c2s_decoded_bytes"] + streams["c2s_skipped_bytes"] == len(stream)
    assert all(i["issue_kind"] == "not-decoded" for i in rows[1]["decode_issues"])


def test_a_capture_begun_inside_a_1_0_connection_is_walked_from_its_first_whole_frame():
    """No SYN, no protocol header: the client's first segment starts at a 1.0 frame (the usual case:
    small frames fill segments from their start); the server's starts inside one and is counted."""
    stream = client_1_0()
    first = first_amqp_frame(stream)
    items = segments(stream, [(first, len(stream))], syn=False)
    server = Segment(T0 + 10**7, *SERVER, *CLIENT, 5000, 1000 + len(stream), 0x18, bytes(50))
    rows = defaultdict(list)
    decoder = CarryingDecoder(Settings(), ["mid.pcap"], lambda table, row: rows[table.name].append(dict(row)))
    for item in items + [server]:
        decoder.feed(item, 0)
    decoder.finish(None, "mid.pcap")
    (streams,) = rows["streams"]
    assert (streams["status"], streams["version"]) == ("amqp-1.0", "1.0")
    assert streams["c2s_undecoded_frames"] == 6 and streams["c2s_skipped_bytes"] == len(stream) - first
    assert streams["s2c_skipped_bytes"] == 50
    assert {i["issue_kind"] for i in rows["decode_issues"]} == {"not-decoded"}
