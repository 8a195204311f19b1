"""Connection-level decoding: which side is the client, which spec, what is not decoded, and how
content is assembled. Captures are built with the crafted-sample helpers (Scapy packets)."""

from __future__ import annotations

import gc
import hashlib
from collections import Counter

import pytest

from amqpcap.capture.tcp import HalfStream, TcpConnection
from amqpcap.connection.decoder import CaptureDecoder
from amqpcap.connection.framing import FrameReader
from amqpcap.connection.record import CONNECTION_END
from amqpcap.connection.stream import AmqpConnection
from amqpcap.settings import Settings
from tests.helpers.samples import EXPECTED, SAMPLES, capture_for, decoded
from tools import craft_samples as craft


def decode(path, **decode_settings):
    decoder = CaptureDecoder(Settings().replace(decode=decode_settings), collect_connections=True)
    return list(decoder.decode([str(path)])), decoder.stats


def write(tmp_path, name, frames, server=craft.SERVER, handshake=True):
    capture = craft.Capture(name, "", craft.segments_of(frames), frames, handshake=handshake)
    path = tmp_path / f"{name}.pcap"
    craft.write_pcap(path, craft.tcp_packets(capture, server=server))
    return path


def small():
    return craft.conversation(large_body=3000)


def test_0_9_header_selects_the_0_9_spec():
    expected = next(p for p in EXPECTED if p.name == "protocol_headers.expected.json")
    _, records, stats = decoded(expected)
    versions = {s["version"] for s in stats.connection_summaries}
    assert "0-9" in versions
    refused = [r for r in records if r["kind"] == "protocol-header" and r["dir"] == "S>C"]
    assert {r["protocol_header"] for r in refused} == {"AMQP 0 0 9 1 (0-9-1)"}
    assert Counter(r["issue_kind"] for r in records if r["kind"] == "issue")["unsupported-version"] == 1


def test_client_from_protocol_header_on_any_port(tmp_path):
    path = write(tmp_path, "other_port", small(), server=("10.1.0.9", 15000))
    records, stats = decode(path)
    (summary,) = stats.connection_summaries
    assert summary["client_decided_by"] in ("SYN", "protocol header")
    assert summary["server"] == "10.1.0.9:15000"
    assert Counter(r["dir"] for r in records if r.get("method") == "basic.publish") == {"C>S": 21}


def test_mid_stream_on_another_port_is_known_by_its_frames(tmp_path):
    """A capture that begins after the handshake, on a port of no known protocol: the first bytes
    are AMQP frames (a known method, frame-end octets where the sizes say), so it is decoded; the
    port setting then only tells who the client is."""
    frames = [f for f in small() if f.name != "protocol-header"]
    path = write(tmp_path, "mid_other_port", frames, server=("10.1.0.9", 15000), handshake=False)
    records, stats = decode(path)
    assert stats.connections == {"amqp": 1}
    assert sum(r.get("method") == "basic.publish" for r in records) == 21
    assert stats.connection_summaries[0]["client_decided_by"].startswith("direction of connection.")
    records, stats = decode(path, amqp_ports=(15000,))
    assert sum(r.get("method") == "basic.publish" for r in records) == 21
    assert stats.connection_summaries[0]["client_decided_by"] == "port"


@pytest.mark.parametrize("first", [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                                   b"\x01\x00\x00\x00\x00\x00\x04\x00\x0a\x00\x0a\x00\xce",
                                   b"\x01\x00\x01\x00\x00\x00\x05\x00\x77\x00\x01\x00\xce" + b"\x00" * 40])
def test_other_protocols_on_another_port_are_not_taken_for_amqp(tmp_path, first):
    """HTTP, TLS, and binary that begins like an AMQP frame but whose frame-end or method does not
    fit: not decoded, every byte counted as ignored."""
    path = tmp_path / "other.pcap"
    segments = [craft.Segment("C>S", 0, first), craft.Segment("C>S", len(first), b"\x00" * 64)]
    capture = craft.Capture("other", "", segments, [])
    craft.write_pcap(path, craft.tcp_packets(capture, server=("10.1.0.9", 15000)))
    records, stats = decode(path)
    assert [r for r in records if r["kind"] != "issue"] == [] and stats.connections == {"not-amqp": 1}
    assert stats.ignored_bytes == len(first) + 64


def test_client_from_method_directions_when_nothing_else_tells(tmp_path):
    frames = [f for f in small() if f.name != "protocol-header"]
    path = write(tmp_path, "no_clues", frames, server=("10.1.0.9", 15000), handshake=False)
    # both ports configured as AMQP ports: neither ports nor SYN nor header can tell
    records, stats = decode(path, amqp_ports=(15000, 40001))
    assert stats.connection_summaries[0]["client_decided_by"].startswith("direction of connection.")
    assert {r["dir"] for r in records if r.get("method") == "basic.publish"} == {"C>S"}
    assert {r["client"] for r in records} == {"10.1.0.5:40001"}


def test_a_tls_client_hello_on_another_port_is_tls(tmp_path):
    """AMQPS on a port of its own: a ClientHello as the client's first bytes makes the connection
    TLS (its handshake accounted), though the port is none of the settings'."""
    hello = bytes.fromhex("160301002d010000290303") + bytes(32) + bytes.fromhex("00000200ff0100")
    path = tmp_path / "tls_elsewhere.pcap"
    segments = [craft.Segment("C>S", 0, hello), craft.Segment("C>S", len(hello), b"\x00" * 64)]
    craft.write_pcap(path, craft.tcp_packets(craft.Capture("x", "", segments, []), server=("10.1.0.9", 15000)))
    records, stats = decode(path)
    assert stats.connections == {"tls": 1}
    (summary,) = stats.connection_summaries
    assert summary["tls"]["client_hello_ns"] is not None and summary["client_decided_by"] == "TLS ClientHello"
    assert [r["issue_kind"] for r in records] == ["tls-resync"] and records[0]["bytes_skipped"] == 64


def test_a_tls_port_that_carries_no_tls_is_counted_not_decoded(tmp_path):
    frames = small()
    path = write(tmp_path, "tls", frames, server=("10.1.0.9", 5671))
    records, stats = decode(path)
    assert {r["issue_kind"] for r in records} == {"tls-not-decoded"}
    assert sum(r["bytes_skipped"] for r in records) == sum(len(f.data) for f in frames)
    assert {(r["client"], r["server"]) for r in records} == {("10.1.0.5:40001", "10.1.0.9:5671")}
    assert all("not TLS records" in r["detail"] and r["tls"] for r in records)
    assert stats.connections == {"tls": 1}


def test_interleaved_channels_assemble_each_message(tmp_path):
    frames = small()
    # move the deliver/header/body of channel 2 between the publish's header and its body frames
    records, _ = decode(write(tmp_path, "interleaved", frames))
    publish = next(r for r in records if r.get("method") == "basic.publish" and r["args"]["routing_key"] == "work")
    body = bytes((i * 7 + 13) % 251 for i in range(3000))  # (the crafted conversation's large body)
    assert publish["message"] == {"body_size": 3000, "body_received": 3000, "body_frames": 1,
                                  "complete": True, "body_sha256": hashlib.sha256(body).hexdigest(),
                                  "properties": {"content_type": "application/octet-stream",
                                                 "headers": {"x-part": 1, "x-source": "crafted"},
                                                 "delivery_mode": 2, "message_id": "big-1"}}
    deliver = next(r for r in records if r.get("method") == "basic.deliver")
    assert deliver["message"]["body_sha256"] == hashlib.sha256(b"hello world").hexdigest()


@pytest.mark.parametrize("name", ["large_and_pipelined.pcap"])
def test_large_bodies_are_hashed_whole(name):
    records, _ = decode(SAMPLES / name)
    big = [r["message"] for r in records if "message" in r and r["message"]["body_size"] == 300_000]
    assert big and all(m["complete"] and m["body_frames"] == 3 for m in big)
    # the recorder's body (tools/record_samples/scenarios.py, large_and_pipelined): published, then got
    body = bytes(range(256)) * (300000 // 256) + b"E" * (300000 % 256)
    assert [m["body_sha256"] for m in big] == [hashlib.sha256(body).hexdigest()] * 2


def test_overlapping_captures_of_one_tuple_never_crash_and_account_every_byte():
    """The crafted captures all replay one 4-tuple at the same times: merged, they collide into
    one stream full of conflicts and holes (a gap even before the first classified byte)."""
    paths = sorted((SAMPLES / "crafted").glob("*.pcap*"))
    decoder = CaptureDecoder(collect_connections=True)
    records = list(decoder.decode([str(p) for p in paths]))
    assert records and not decoder.stats.failed
    for summary in decoder.stats.connection_summaries:
        for facts in summary["directions"].values():
            assert facts["stream_bytes"] == facts["decoded_bytes"] + facts["skipped_bytes"]


def _facts(records):
    return Counter((r["connection"], r["dir"], r["kind"], r["offset"], r["size"], r.get("method"),
                    r.get("issue_kind")) for r in records)


def test_a_folder_decodes_like_its_files_one_by_one():
    alone = Counter()
    for path in sorted(p for p in SAMPLES.rglob("*") if ".pcap" in p.name):
        alone += _facts(CaptureDecoder().decode([str(path)]))
    assert _facts(CaptureDecoder().decode([str(SAMPLES)])) == alone


@pytest.mark.parametrize("name, pieces", [("large_and_pipelined.pcap", 7), ("concurrent.pcap", 50)])
def test_rotated_files_stitch_into_the_unsplit_capture(tmp_path, name, pieces):
    """tcpdump -C/-G style: the same packets cut into many files give the same frames."""
    import struct
    data = (SAMPLES / name).read_bytes()
    header, records, pos = data[:24], [], 24
    while pos < len(data):
        length = struct.unpack_from("<I", data, pos + 8)[0]
        records.append(data[pos:pos + 16 + length])
        pos += 16 + length
    size = -(-len(records) // pieces)
    for i in range(0, len(records), size):
        (tmp_path / f"rotated.pcap{i // size:03d}").write_bytes(header + b"".join(records[i:i + size]))
    rotated = sorted(str(p) for p in tmp_path.iterdir())
    assert len(rotated) > pieces // 2
    whole = list(CaptureDecoder().decode([str(SAMPLES / name)]))
    split = list(CaptureDecoder().decode(rotated))
    per_file = ("capture", "pcap_record", "pcap_record_last", "tcp_stream")
    strip = lambda records: [{k: v for k, v in r.items() if k not in per_file} for r in records]
    assert strip(split) == strip(whole)
    assert {r["capture"] for r in split} > {rotated[0]}
    # numbered within each file: the whole file's record number less the records of earlier files
    before = dict(zip(rotated, range(0, len(records), size)))
    for piece, one in zip(split, whole):
        if one["pcap_record"] is not None:
            assert piece["pcap_record"] == one["pcap_record"] - before[piece["capture"]]


def _packet_times(path):
    """Independently of the reassembler: per (source, destination) endpoint pair, the stream
    offset where each data packet starts and its time. Valid for captures whose packets arrive
    in order without retransmissions, as loopback recordings do."""
    from amqpcap.capture.packets import PacketParser, format_endpoint
    from amqpcap.capture.readers import read_records
    parser, streams = PacketParser(), {}
    for ts_ns, link_type, data in read_records(str(path)):
        segment = parser.parse(ts_ns, link_type, data)
        if segment is None or not segment.payload:
            continue
        key = (format_endpoint(segment.src, segment.sport), format_endpoint(segment.dst, segment.dport))
        starts = streams.setdefault(key, ([], []))
        offset = starts[0][-1] + starts[1][-1][1] if starts[0] else 0
        starts[0].append(offset)
        starts[1].append((ts_ns, len(segment.payload)))
    return streams


@pytest.mark.parametrize("name", ["large_and_pipelined.pcap", "mid_stream.pcap", "confirms.pcap",
                                  "crafted/mid_frame_start.pcap.gz", "crafted/clean.pcap.gz"])
def test_every_record_is_timed_by_the_packets_of_its_first_and_last_byte(name):
    """Streamed bodies and bytes skipped at a mid-stream start span many packets: their times
    must still be those of the packets holding their first and last bytes."""
    import bisect
    streams = _packet_times(SAMPLES / name)
    records, _ = decode(SAMPLES / name)
    checked = Counter()
    for record in records:
        if not record["size"]:
            continue
        source, target = (record["client"], record["server"]) if record["dir"] == "C>S" else \
            (record["server"], record["client"])
        starts, packets = streams[(source, target)]
        first = packets[bisect.bisect_right(starts, record["offset"]) - 1][0]
        last = packets[bisect.bisect_right(starts, record["offset"] + record["size"] - 1) - 1][0]
        assert (record["ts_ns"], record["ts_last_ns"]) == (first, last), record
        checked[record["kind"] if record["size"] < 65536 else "large " + record["kind"]] += 1
    assert checked["method"] and checked["header"]
    if name.startswith("large"):
        assert checked["large body"] >= 3
    if "mid" in name:
        assert checked["issue"] >= 1


def test_an_ended_connection_is_freed_without_the_cyclic_collector():
    """Decoding spaces the cyclic collector's runs out (amqpcap.process), so an ended
    connection's objects must be freed by reference counting: with the collector off, none is left
    once every connection of the input has ended (a night's would pile up otherwise)."""
    captures = [str(capture_for(p)) for p in EXPECTED if p.parent == SAMPLES]
    kinds = (TcpConnection, HalfStream, AmqpConnection, FrameReader)
    gc.collect()
    gc.disable()
    try:
        decoder = CaptureDecoder()
        ends = sum(r["kind"] == CONNECTION_END for r in decoder.decode(captures, ends=True))
        left = Counter(type(o).__name__ for o in gc.get_objects() if isinstance(o, kinds))
    finally:
        gc.enable()
    assert ends >= 50  # every recorded sample: AMQP ones, TLS, half-open, not AMQP
    assert left == Counter()
