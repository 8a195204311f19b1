"""Differential test against tshark, an independent decoder: per direction, the same methods.

tshark must be installed (.ci/run installs it); outside CI the test is skipped without it. Where
tshark is known to be wrong, the test checks that it is wrong in exactly the documented way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from amqpcap.connection.decoder import CaptureDecoder
from amqpcap.protocol.spec import load_spec
from tests.helpers.samples import ROOT, SHARED, key_log_for, keys_for

TSHARK = shutil.which("tshark")
pytestmark = pytest.mark.skipif(TSHARK is None and not os.environ.get("CI"),
                                reason="tshark is not installed (CI installs it)")

CAPTURES = sorted(p for p in (ROOT / "data" / "samples").rglob("*") if ".pcap" in p.name) + \
    sorted((SHARED / "captures" / "public").glob("*.pcap"))

# sample -> (why tshark is wrong, what it shows that we do not, which of our methods it lacks:
# "all after the damage" means it sees only a subset of ours)
TSHARK_WRONG = {
    "connection_errors.pcap": (
        "tshark never checks the frame-end octet: it decodes the basic.qos sent with a corrupt "
        "frame-end (RabbitMQ refuses it with 501 FRAME_ERROR), and it counts method 60.99, which "
        "no spec defines", {"C>S": {"basic.qos": 1, "60.99": 1}}),
    "gap_in_methods.pcap.gz": ("tshark does not resynchronise after bytes the capture lost: it "
                               "decodes nothing of that direction after the gap", None),
    "gap_in_body.pcap.gz": ("bytes lost inside a body frame end tshark's decoding of that direction, "
                            "though the frame's extent is known and framing can continue", None),
    "mid_frame_start.pcap.gz": ("tshark cannot find frames in a stream that starts inside a frame",
                                None),
    "mid_stream.pcap": ("tshark cannot find frames in a stream that starts inside a frame", None),
}

# samples whose packets arrive out of order (frames complete in a later packet than their last byte's)
REORDERED = {"out_of_order.pcap.gz"}


def tls_ports(path: Path) -> list[int]:
    """The server ports a TLS sample's connections used (its expected facts say)."""
    expected = path.parent / (path.name.split(".")[0] + ".expected.json")
    if not expected.exists():
        return []
    return sorted({c["server_port"] for c in json.loads(expected.read_text()).get("tls", []) if c["tls"]})


def tshark_options(path: Path) -> list[str]:
    """How tshark reads a sample: AMQP on 5672, and a TLS sample's TLS ports decrypted with its key
    log, AMQP inside (-o tls.keylog_file:F -d tls.port==P,amqp)."""
    options = ["-o", "tcp.reassemble_out_of_order:TRUE", "-d", "tcp.port==5672,amqp"]
    keys = key_log_for(path)
    if keys is not None:
        options += ["-o", f"tls.keylog_file:{keys}"]
    for port in tls_ports(path):
        options += ["-d", f"tcp.port=={port},tls", "-d", f"tls.port=={port},amqp"]
    return options


def server_ports(path: Path) -> set[str]:
    return {"5672", *map(str, tls_ports(path))}


def tshark_methods(path: Path) -> dict[str, Counter]:
    spec = load_spec("0-9-1")
    result = subprocess.run(
        [TSHARK, "-r", str(path), *tshark_options(path),
         "-Y", "amqp", "-T", "fields", "-e", "tcp.dstport", "-e", "amqp.method.class",
         "-e", "amqp.method.method", "-E", "occurrence=a", "-E", "aggregator=|"],
        capture_output=True, text=True)
    # exit status 2 with a complete listing: the file's last record is cut short (tshark says so)
    if result.returncode and not (result.returncode == 2 and "cut short" in result.stderr):
        raise AssertionError(f"tshark failed on {path}: {result.stderr}")
    counts = {"C>S": Counter(), "S>C": Counter()}
    servers = server_ports(path)
    for line in result.stdout.splitlines():
        dport, classes, method_ids = (line.split("\t") + ["", ""])[:3]
        if not classes:
            continue
        direction = "C>S" if dport in servers else "S>C"
        for class_id, method_id in zip(classes.split("|"), method_ids.split("|")):
            method = spec.method(int(class_id), int(method_id))
            counts[direction][method.full_name if method else f"{class_id}.{method_id}"] += 1
    return counts


def our_methods(path: Path) -> dict[str, Counter]:
    counts = {"C>S": Counter(), "S>C": Counter()}
    for record in CaptureDecoder(keys=keys_for(path)).decode([str(path)]):
        if record["kind"] == "method":
            counts[record["dir"]][record["method"]] += 1
    return counts


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_methods_agree_with_tshark(path):
    ours, theirs = our_methods(path), tshark_methods(path)
    assert sum(sum(c.values()) for c in ours.values()) > 0
    known = TSHARK_WRONG.get(path.name)
    if known is None:
        assert ours == theirs
        return
    _, extra = known
    for direction in ("C>S", "S>C"):
        if extra is not None:  # tshark shows these on top of ours
            assert theirs[direction] - ours[direction] == Counter(extra.get(direction, {}))
            assert ours[direction] - theirs[direction] == Counter()
        else:  # tshark sees a strict subset
            assert theirs[direction] - ours[direction] == Counter()
    assert ours != theirs  # if tshark ever gets it right, drop the entry


def _tshark_fields(path: Path, *fields: str, display_filter: str | None = None) -> list[list[str]]:
    command = [TSHARK, "-r", str(path), *tshark_options(path), "-T", "fields", "-E", "occurrence=a",
               "-E", "aggregator=|"]
    if display_filter:
        command += ["-Y", display_filter]
    for name in fields:
        command += ["-e", name]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode and not (result.returncode == 2 and "cut short" in result.stderr):
        raise AssertionError(f"tshark failed on {path}: {result.stderr}")
    return [line.split("\t") for line in result.stdout.splitlines()]


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_stream_index_of_every_packet_agrees_with_tshark(path):
    """Our TCP stream numbering (tcp.stream) of every TCP packet, the file read in one pass and in
    byte ranges, against tshark's; record numbers are frame.number."""
    from amqpcap.capture.packets import PacketParser
    from amqpcap.capture.readers import read_records
    from amqpcap.capture.stream_index import FileStreams, RangeStreams, StreamIndex
    theirs = {int(number): int(stream) for number, stream in _tshark_fields(path, "frame.number", "tcp.stream")
              if stream}
    parser, streams = PacketParser(), FileStreams()
    ours, segments = {}, []
    for number, (ts_ns, link_type, data) in enumerate(read_records(str(path)), 1):
        segment = parser.parse(ts_ns, link_type, data)
        if segment is not None:
            ours[number] = streams.segment(segment.src, segment.sport, segment.dst, segment.dport, segment.flags,
                                           segment.seq, segment.ts_ns)
            segments.append((number, segment))
    # IP fragments reassembled by both: tshark shows the stream on the last fragment, as we do
    assert ours == {n: s for n, s in theirs.items() if n in ours}
    assert len(ours) >= 0.95 * len(theirs)
    # the same numbering when the packets are read as three ranges, each blind to the others
    index, placed = StreamIndex(), {}
    for part in range(3):
        local = RangeStreams()
        numbers = [(n, local.segment(s.src, s.sport, s.dst, s.dport, s.flags, s.seq, s.ts_ns))
                   for n, s in segments[part * len(segments) // 3:(part + 1) * len(segments) // 3]]
        mapped = [index.place(stream) for stream in local.streams]
        placed.update((n, mapped[i]) for n, i in numbers)
    assert placed == ours


@pytest.mark.parametrize("path", [p for p in CAPTURES if p.name not in TSHARK_WRONG],
                         ids=[p.name for p in CAPTURES if p.name not in TSHARK_WRONG])
def test_method_records_name_the_packets_tshark_shows_them_in(path):
    """Every method record's pcap_record_last (the packet completing the frame) and tcp_stream are
    the frame.number and tcp.stream where tshark shows that method."""
    spec = load_spec("0-9-1")
    theirs = Counter()
    for number, stream, classes, methods in _tshark_fields(path, "frame.number", "tcp.stream", "amqp.method.class",
                                                           "amqp.method.method", display_filter="amqp"):
        for class_id, method_id in zip(classes.split("|"), methods.split("|")) if classes else ():
            theirs[(int(number), int(stream), spec.method(int(class_id), int(method_id)).full_name)] += 1
    ours = Counter((r["pcap_record_last"], r["tcp_stream"], r["method"])
                   for r in CaptureDecoder(keys=keys_for(path)).decode([str(path)]) if r["kind"] == "method")
    if path.name in REORDERED:
        # tshark shows a frame in the packet that completed its in-order reassembly; ours names the
        # packet that holds its last byte, which arrived earlier: same frames, never a later packet
        assert Counter(k[1:] for k in ours.elements()) == Counter(k[1:] for k in theirs.elements())
        pairs = zip(sorted(ours.elements(), key=lambda k: (k[1:], k[0])),
                    sorted(theirs.elements(), key=lambda k: (k[1:], k[0])))
        assert all(mine[0] <= shown[0] for mine, shown in pairs)
        assert ours != theirs
    else:
        assert ours == theirs
