"""Build the crafted captures in data/samples/crafted/: TCP and link-layer situations a loopback
broker cannot produce (reordering, loss, conflicting retransmissions, a capture that starts inside
a frame, sequence wrap-around, port reuse, VLAN tags, cooked and BSD link types, IPv6 extension
headers, IP fragments, a damaged file tail).

    python tools/craft_samples.py            # rewrite data/samples/crafted/

One AMQP 0-9-1 conversation (frames encoded by pamqp, an independent encoder) is cut into TCP
segments, and each scenario transforms the segments or their framing. Because the generator
knows which bytes it removed and where frames start, every expected value (frames per method and
direction, bytes skipped, issues) is exact by construction, written beside each capture as
<name>.expected.json.
"""

from __future__ import annotations

import gzip
import json
import struct
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pamqp import commands as C
from pamqp import frame as F
from pamqp.body import ContentBody
from pamqp.header import ContentHeader, ProtocolHeader
from pamqp.heartbeat import Heartbeat
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop
from scapy.layers.l2 import Dot1AD, Dot1Q, Ether
from scapy.utils import RawPcapNgWriter

OUT = Path(__file__).resolve().parent.parent / "data" / "samples" / "crafted"
CLIENT, SERVER = ("10.1.0.5", 40001), ("10.1.0.9", 5672)
CLIENT6, SERVER6 = ("fd00::5", 40001), ("fd00::9", 5672)
T0 = 1_700_000_000_000_000_000  # ns
MSS = 1448
PASSWORD = "S3cr3t-Pa55w0rd!"


@dataclass
class Frame:
    direction: str  # "C>S" or "S>C"
    name: str  # method name, "header", "body", "heartbeat" or "protocol-header"
    data: bytes


def conversation(large_body: int = 140_000) -> list[Frame]:
    """A publisher and consumer on one connection: handshake, two channels, a large message split
    over several body frames, a delivery, acks, heartbeats, close."""
    def m(direction, command, channel=0):
        return Frame(direction, _name(command), F.marshal(command, channel))

    body = bytes((i * 7 + 13) % 251 for i in range(large_body))
    props = C.Basic.Properties(content_type="application/octet-stream", delivery_mode=2,
                               message_id="big-1", headers={"x-part": 1, "x-source": "crafted"})
    frames = [Frame("C>S", "protocol-header", F.marshal(ProtocolHeader(), 0)),
              m("S>C", C.Connection.Start(server_properties={"product": "RabbitMQ"}, mechanisms="PLAIN",
                                          locales="en_US")),
              m("C>S", C.Connection.StartOk(client_properties={"product": "crafted"}, mechanism="PLAIN",
                                            response=f"\0amqpcap\0{PASSWORD}", locale="en_US")),
              m("S>C", C.Connection.Tune(channel_max=2047, frame_max=131072, heartbeat=60)),
              m("C>S", C.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=60)),
              m("C>S", C.Connection.Open(virtual_host="/")),
              m("S>C", C.Connection.OpenOk()),
              m("C>S", C.Channel.Open(), 1), m("S>C", C.Channel.OpenOk(), 1),
              m("C>S", C.Channel.Open(), 2), m("S>C", C.Channel.OpenOk(), 2),
              m("C>S", C.Basic.Consume(queue="work", consumer_tag="c1"), 2),
              m("S>C", C.Basic.ConsumeOk(consumer_tag="c1"), 2)]
    frames.append(m("C>S", C.Basic.Publish(exchange="", routing_key="work"), 1))
    frames.append(Frame("C>S", "header", F.marshal(ContentHeader(0, len(body), props), 1)))
    for start in range(0, len(body), 131072 - 8):
        frames.append(Frame("C>S", "body", F.marshal(ContentBody(body[start:start + 131064]), 1)))
    frames.append(Frame("C>S", "heartbeat", F.marshal(Heartbeat(), 0)))
    frames.append(m("S>C", C.Basic.Deliver(consumer_tag="c1", delivery_tag=1, exchange="",
                                           routing_key="work"), 2))
    frames.append(Frame("S>C", "header", F.marshal(ContentHeader(0, 11, props), 2)))
    frames.append(Frame("S>C", "body", F.marshal(ContentBody(b"hello world"), 2)))
    frames.append(m("C>S", C.Basic.Ack(delivery_tag=1), 2))
    for i in range(20):  # many small publishes: many frames per segment
        frames.append(m("C>S", C.Basic.Publish(exchange="amq.topic", routing_key=f"k.{i}"), 1))
        frames.append(Frame("C>S", "header", F.marshal(ContentHeader(0, 5, C.Basic.Properties()), 1)))
        frames.append(Frame("C>S", "body", F.marshal(ContentBody(b"small"), 1)))
    frames += [m("S>C", C.Basic.Cancel(consumer_tag="c1"), 2),  # consumer cancel notification
               m("C>S", C.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0), 0),
               m("S>C", C.Connection.CloseOk(), 0)]
    return frames


def _name(command) -> str:
    cls, method = command.name.split(".")
    snake = "".join("-" + c.lower() if c.isupper() else c for c in method).lstrip("-")
    return f"{cls.lower()}.{snake}"


@dataclass
class Segment:
    direction: str
    seq_offset: int  # stream offset of the first payload byte
    data: bytes
    flags: str = "PA"


@dataclass
class Capture:
    """What a scenario writes: segments in order, per-direction ISNs, and the expectations."""

    name: str
    description: str
    segments: list[Segment]
    expected_frames: list[Frame]
    skipped: dict = field(default_factory=lambda: {"C>S": 0, "S>C": 0})
    issues: Counter = field(default_factory=Counter)
    isn: dict = field(default_factory=lambda: {"C>S": 1_000_000, "S>C": 5_000_000})
    handshake: bool = True  # SYN / SYN-ACK / final FINs
    lost: list = field(default_factory=list)  # (direction, offset, size): received but not captured
    starts_mid_stream: bool = False
    incomplete_messages: int = 0


def segments_of(frames: list[Frame]) -> list[Segment]:
    """Interleave the directions the way a conversation runs: each direction's bytes are cut into
    MSS-sized segments at frame-group boundaries, in frame order."""
    out: list[Segment] = []
    offsets = {"C>S": 0, "S>C": 0}
    run: list[Frame] = []

    def flush():
        if not run:
            return
        direction = run[0].direction
        data = b"".join(f.data for f in run)
        for i in range(0, len(data), MSS):
            out.append(Segment(direction, offsets[direction] + i, data[i:i + MSS]))
        offsets[direction] += len(data)
        run.clear()

    for frame in frames:
        if run and run[0].direction != frame.direction:
            flush()
        run.append(frame)
    flush()
    return out


def stream_offsets(frames: list[Frame], direction: str) -> list[tuple[int, Frame]]:
    offset, out = 0, []
    for frame in frames:
        if frame.direction == direction:
            out.append((offset, frame))
            offset += len(frame.data)
    return out


# -- scenarios ---------------------------------------------------------------------------------

def clean() -> Capture:
    frames = conversation()
    return Capture("clean", "the base conversation, in order, nothing lost", segments_of(frames), frames)


def out_of_order() -> Capture:
    frames = conversation()
    segments = segments_of(frames)
    client = [i for i, s in enumerate(segments) if s.direction == "C>S"]
    # swap segment pairs and move one segment 5 places later
    for a, b in zip(client[3:40:6], client[4:41:6]):
        segments[a], segments[b] = segments[b], segments[a]
    moved = segments.pop(client[50])
    segments.insert(client[50] + 5, moved)
    return Capture("out_of_order", "client segments swapped in pairs and one delivered 5 segments "
                   "late; decodes exactly like the clean conversation", segments, frames)


def retransmissions() -> Capture:
    frames = conversation()
    segments = segments_of(frames)
    extra: list[Segment] = []
    for i, s in enumerate(segments):
        if s.direction == "C>S" and i % 9 == 4:
            extra.append((i, Segment(s.direction, s.seq_offset, s.data)))  # exact duplicate
        following = segments[i + 1] if i + 1 < len(segments) else None
        if s.direction == "C>S" and i % 13 == 7 and following is not None and following.direction == "C>S" \
                and following.seq_offset == s.seq_offset + len(s.data):
            # an overlapping retransmission: the tail of this segment and the head of the next
            extra.append((i + 1, Segment(s.direction, s.seq_offset + 50, s.data[50:] + following.data[:50])))
    for position, segment in reversed(extra):
        segments.insert(position + 1, segment)
    return Capture("retransmissions", "duplicate and partially overlapping retransmissions; each "
                   "byte decodes once", segments, frames)


def retransmission_conflict() -> Capture:
    frames = conversation()
    segments = segments_of(frames)
    index = next(i for i, s in enumerate(segments) if s.direction == "C>S" and s.seq_offset > 120_000)
    original = segments[index]
    changed = bytes(b ^ 0xFF for b in original.data[:10]) + original.data[10:]
    segments.insert(index + 1, Segment("C>S", original.seq_offset, changed))
    capture = Capture("retransmission_conflict", "a retransmission whose first 10 bytes differ from "
                      "the first copy: the first copy is decoded, the conflict reported", segments, frames)
    capture.issues["retransmission-conflict"] = 1
    return capture


def gap_in_body() -> Capture:
    """A lost segment inside the large body frame: framing is kept, only the message is incomplete."""
    frames = conversation()
    segments = segments_of(frames)
    index = next(i for i, s in enumerate(segments) if s.direction == "C>S" and s.seq_offset > 100_000)
    lost = segments.pop(index)
    capture = Capture("gap_in_body", "one client segment inside a 131 kB body frame never "
                      "captured: framing is kept, the message is reported incomplete", segments, frames)
    capture.skipped["C>S"] = len(lost.data)
    capture.lost = [("C>S", lost.seq_offset, len(lost.data))]
    capture.issues["gap"] = 1
    capture.incomplete_messages = 1
    return capture


def gap_in_methods() -> Capture:
    """Bytes lost from the 11th byte of a small publish's method frame to the 4th byte of its body
    frame: the publish is lost whole, decoding resumes at the next publish."""
    frames = conversation()
    client = stream_offsets(frames, "C>S")
    small = [(o, f) for o, f in client if f.name == "basic.publish" and b"k.5" in f.data][0]
    position = client.index(small)
    triple_start = small[0]
    body_start, _ = client[position + 2]
    after = client[position + 3][0]
    lo, hi = triple_start + 10, body_start + 3
    segments = [s for s in resegment(segments_of(frames), "C>S", [lo, hi])
                if not (s.direction == "C>S" and s.seq_offset == lo)]
    lost_frames = {id(f) for _, f in client[position:position + 3]}
    capture = Capture("gap_in_methods", "bytes lost from inside a basic.publish method frame to "
                      "inside its body frame: that message is lost whole (a gap, then a resync over "
                      "the body's tail), every other frame decodes",
                      segments, [f for f in frames if id(f) not in lost_frames])
    capture.skipped["C>S"] = after - triple_start
    capture.lost = [("C>S", lo, hi - lo)]
    capture.issues.update({"gap": 1, "resync": 1})
    return capture


def resegment(segments: list[Segment], direction: str, cuts: list[int]) -> list[Segment]:
    """Split one direction's segments so that a segment starts at every cut offset."""
    out = []
    for segment in segments:
        pieces = [segment]
        if segment.direction == direction:
            for cut in cuts:
                last = pieces[-1]
                if last.seq_offset < cut < last.seq_offset + len(last.data):
                    split = cut - last.seq_offset
                    pieces[-1:] = [Segment(direction, last.seq_offset, last.data[:split]),
                                   Segment(direction, cut, last.data[split:])]
        out += pieces
    return out


def mid_frame_start() -> Capture:
    """The capture begins 40 kB into the first large body frame (no SYN, no handshake)."""
    frames = conversation()
    segments = segments_of(frames)
    client = stream_offsets(frames, "C>S")
    first_body = next(o for o, f in client if f.name == "body")
    first = next(i for i, s in enumerate(segments)
                 if s.direction == "C>S" and s.seq_offset >= first_body + 40_000)
    captured_from = segments[first].seq_offset
    next_frame = next(o for o, f in client if o >= captured_from)
    server = stream_offsets(frames, "S>C")
    server_from = next(s.seq_offset for s in segments[first:] if s.direction == "S>C")
    keep = {id(f) for o, f in client if o >= next_frame} | {id(f) for o, f in server if o >= server_from}
    capture = Capture("mid_frame_start", "capture started 40 kB into a 131 kB body frame, mid-"
                      "connection: everything from the next frame boundary on decodes",
                      segments[first:], [f for f in frames if id(f) in keep], handshake=False,
                      starts_mid_stream=True)
    capture.skipped["C>S"] = next_frame - captured_from
    capture.lost = [("C>S", 0, captured_from), ("S>C", 0, server_from)]  # before the capture began
    # the message's remaining body frames: their method and header were never captured
    orphans = 0
    for offset, frame in client:
        if offset >= next_frame:
            if frame.name != "body":
                break
            orphans += 1
    capture.issues.update({"resync": 1, "unexpected-body": orphans})
    return capture


def seq_wrap() -> Capture:
    frames = conversation()
    capture = Capture("seq_wrap", "initial sequence numbers just below 2**32 in both directions: "
                      "the streams wrap around mid-conversation", segments_of(frames), frames)
    capture.isn = {"C>S": 2**32 - 70_000, "S>C": 2**32 - 300}
    return capture


SCENARIOS = [clean, out_of_order, retransmissions, retransmission_conflict, gap_in_body,
             gap_in_methods, mid_frame_start, seq_wrap]


# -- writing -------------------------------------------------------------------------------------

def tcp_packets(capture: Capture, client=CLIENT, server=SERVER, ipv6: bool = False, sport=None):
    """Scapy packets for a capture's segments, with handshake and FINs when it has them."""
    client = (client[0], sport or client[1])
    ip = (lambda src, dst: IPv6(src=src, dst=dst)) if ipv6 else (lambda src, dst: IP(src=src, dst=dst))
    ends = {"C>S": (client, server), "S>C": (server, client)}
    isn = capture.isn
    acked = {"C>S": 0, "S>C": 0}  # cumulative: what the receiver holds without a hole
    have = {"C>S": {}, "S>C": {}}  # offset -> end of every range the receiver holds
    for direction, offset, size in capture.lost:
        have[direction][offset] = offset + size
    packets = []

    def receive(direction, offset, size):
        have[direction][offset] = max(have[direction].get(offset, 0), offset + size)
        while acked[direction] in have[direction]:
            acked[direction] = have[direction].pop(acked[direction])

    def seq(direction, offset):
        return (isn[direction] + 1 + offset) % 2**32

    def packet(direction, flags, offset, data=b""):
        (src, sport_), (dst, dport) = ends[direction]
        other = "S>C" if direction == "C>S" else "C>S"
        return ip(src, dst) / TCP(sport=sport_, dport=dport, flags=flags, seq=seq(direction, offset),
                                  ack=seq(other, acked[other]), window=65535) / data

    if capture.handshake:
        (csrc, cport), (sdst, sport_) = client, server
        packets.append(ip(csrc, sdst) / TCP(sport=cport, dport=sport_, flags="S", seq=isn["C>S"]))
        packets.append(ip(sdst, csrc) / TCP(sport=sport_, dport=cport, flags="SA", seq=isn["S>C"],
                                            ack=seq("C>S", 0)))
        packets.append(packet("C>S", "A", 0))
    for s in capture.segments:
        packets.append(packet(s.direction, s.flags, s.seq_offset, s.data))
        receive(s.direction, s.seq_offset, len(s.data))
    if capture.handshake:
        packets.append(packet("C>S", "FA", acked["C>S"]))
        packets.append(packet("S>C", "FA", acked["S>C"]))
        acked["C>S"] += 1
        acked["S>C"] += 1
        packets.append(packet("C>S", "A", acked["C>S"]))
    return packets


_slots = iter(range(1000))


def next_slot() -> tuple[int, int]:
    """(client port, first timestamp) of the next capture written: each gets its own, so decoding
    the whole folder at once (files are merged by time) keeps every connection apart."""
    slot = next(_slots)
    return CLIENT[1] + slot, T0 + slot * 3600 * 10**9


def write_pcap(path: Path, packets, link: str = "ether", nano: bool = False, t0: int = T0) -> None:
    """Write packets with the chosen link-layer framing; timestamps 1 ms apart. A path ending in
    .gz is gzip-compressed (reproducibly: no name, no mtime)."""
    link_types = {"ether": 1, "vlan": 1, "qinq": 1, "sll": 113, "sll2": 276, "null": 0, "raw": 101}
    # The pcap format by hand: Scapy's writer refuses link type 0 (BSD NULL).
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = [struct.pack("<IHHiIII", magic, 2, 4, 0, 0, 262144, link_types[link])]
    for i, pkt in enumerate(packets):
        ts_ns = t0 + i * 1_000_000
        data = _frame(link, pkt)
        fraction = (ts_ns % 10**9) // (1 if nano else 1000)
        out.append(struct.pack("<IIII", ts_ns // 10**9, fraction, len(data), len(data)) + data)
    blob = b"".join(out)
    path.write_bytes(gzip.compress(blob, mtime=0) if path.suffix == ".gz" else blob)


def _frame(link: str, pkt) -> bytes:
    ipv6 = pkt.haslayer(IPv6)
    ether_type = 0x86DD if ipv6 else 0x0800
    raw = bytes(pkt)
    if link == "ether":
        return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=ether_type)) + raw
    if link == "vlan":
        return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") /
                     Dot1Q(vlan=42, type=ether_type)) + raw
    if link == "qinq":
        return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / Dot1AD(vlan=7) /
                     Dot1Q(vlan=42, type=ether_type)) + raw
    if link == "sll":
        return struct.pack(">HHH8sH", 0, 772, 6, b"\0" * 8, ether_type) + raw
    if link == "sll2":
        return struct.pack(">HHIHBB8s", ether_type, 0, 1, 772, 0, 6, b"\0" * 8) + raw
    if link == "null":
        return struct.pack("<I", 30 if ipv6 else 2) + raw
    return raw


def expected_json(capture: Capture, file: str, link_types: list[str], resolution: str = "us",
                  fmt: str = "pcap", connections: int = 1, ip_versions: tuple = (4,)) -> dict:
    methods = {"C>S": Counter(), "S>C": Counter()}
    kinds = {"C>S": Counter(), "S>C": Counter()}
    for frame in capture.expected_frames:
        kinds[frame.direction][frame.name if frame.name in ("header", "body", "heartbeat",
                                                            "protocol-header") else "method"] += 1
        if "." in frame.name:
            methods[frame.direction][frame.name] += 1
    return {
        "scenario": capture.name, "description": capture.description,
        "capture": {"file": file, "format": fmt, "link_types": link_types,
                    "timestamp_resolution": resolution, "starts_mid_stream": capture.starts_mid_stream},
        "clients": ["crafted (pamqp 4 frames, Scapy packets)"], "broker": "none (crafted)",
        "auth_mechanisms": ["PLAIN"] if methods["C>S"]["connection.start-ok"] else [],
        "users": ["amqpcap"] if methods["C>S"]["connection.start-ok"] else [],
        "connections": connections, "ip_versions": list(ip_versions),
        "channels_opened": sum(methods["C>S"][k] for k in ["channel.open"]) * connections,
        "methods": {d: {k: v * connections for k, v in sorted(c.items())} for d, c in methods.items()},
        "frames": {d: {k: v * connections for k, v in sorted(c.items())} for d, c in kinds.items()},
        "bytes_skipped": {d: v * connections for d, v in capture.skipped.items()},
        "issues": {k: v * connections for k, v in sorted(capture.issues.items()) if v},
        "incomplete_messages": capture.incomplete_messages * connections,
    }


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    written = []
    for scenario in SCENARIOS:
        capture = scenario()
        path = OUT / f"{capture.name}.pcap.gz"  # a 140 kB message each: compressed, they stay small
        port, t0 = next_slot()
        write_pcap(path, tcp_packets(capture, sport=port), t0=t0)
        (OUT / f"{capture.name}.expected.json").write_text(
            json.dumps(expected_json(capture, path.name, ["EN10MB"], fmt="pcap.gz"), indent=2) + "\n")
        written.append(path)
    written += link_variants()
    for path in written:
        print(f"{path.relative_to(OUT.parent.parent.parent)}  {path.stat().st_size} bytes")
    return 0


def link_variants() -> list[Path]:
    """The clean conversation (with a smaller body) under other link types and IP features."""
    written = []
    small = Capture("link", "", [], [])
    frames = conversation(large_body=5000)
    small.segments, small.expected_frames = segments_of(frames), frames
    for name, link, kwargs, nano in [("vlan_qinq", "qinq", {}, False), ("linux_sll", "sll", {}, True),
                                     ("linux_sll2", "sll2", {}, False), ("bsd_null_ipv6", "null",
                                     {"client": CLIENT6, "server": SERVER6, "ipv6": True}, False)]:
        small.name = name
        small.description = f"the conversation (5 kB body) with {link} link-layer framing" + \
            (" over IPv6" if kwargs.get("ipv6") else "") + (", nanosecond timestamps" if nano else "")
        path = OUT / f"{name}.pcap"
        port, t0 = next_slot()
        packets = tcp_packets(small, sport=port, **kwargs)
        write_pcap(path, packets, link, nano, t0=t0)
        link_name = {"qinq": "EN10MB", "sll": "LINUX_SLL", "sll2": "LINUX_SLL2", "null": "NULL"}[link]
        (OUT / f"{name}.expected.json").write_text(json.dumps(expected_json(
            small, path.name, [link_name], "ns" if nano else "us",
            ip_versions=(6,) if kwargs.get("ipv6") else (4,)), indent=2) + "\n")
        written.append(path)
    written.append(_ip_features(frames))
    written.append(_truncated_gzip(frames))
    return written


def _ip_features(frames: list[Frame]) -> Path:
    """IPv4 options, IPv4 fragments, IPv6 extension headers and IPv6 fragments in one pcapng with
    two interfaces of different link types: two connections of the small conversation."""
    capture = Capture("ip_features", "", segments_of(frames), frames)
    port, t0 = next_slot()
    v4 = tcp_packets(capture, sport=port)
    v6 = tcp_packets(capture, client=CLIENT6, server=SERVER6, ipv6=True, sport=port)
    packets = []
    for i, pkt in enumerate(v4):
        pkt[IP].options = [b"\x01\x01\x01\x00"]  # NOP NOP NOP EOL: 4 bytes of options
        if i % 5 == 3 and len(pkt[TCP].payload):
            packets += [(0, bytes(f)) for f in _fragment4(pkt)]
        else:
            packets.append((0, bytes(pkt)))
    for i, pkt in enumerate(v6):
        ext = IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt()
        pkt = IPv6(src=pkt[IPv6].src, dst=pkt[IPv6].dst) / ext / pkt[TCP]
        if i % 5 == 3 and len(pkt[TCP].payload) > 200:
            packets += [(1, bytes(f)) for f in _fragment6(pkt)]
        else:
            packets.append((1, bytes(pkt)))
    path = OUT / "ip_features.pcapng"
    writer = RawPcapNgWriter(str(path))
    writer.linktype = 1  # the first interface (Scapy's default one) is Ethernet
    writer._write_header(None)
    interfaces = {0: (1, None), 1: (101, b"raw0")}  # a named interface gets its own IDB
    for n, (interface, data) in enumerate(packets):
        link_type, name = interfaces[interface]
        frame = _frame("ether", IP(data)) if interface == 0 else data
        writer._write_packet(frame, link_type, sec=(t0 + n * 1_000_000) / 1e9, ifname=name)
    writer.close()
    (OUT / "ip_features.expected.json").write_text(json.dumps(expected_json(
        capture_named(capture, "ip_features", "IPv4 with options and fragments on an Ethernet "
                      "interface, IPv6 with hop-by-hop and destination-options headers and fragments "
                      "on a raw-IP interface, in one pcapng"),
        path.name, ["EN10MB", "RAW"], fmt="pcapng", connections=2, ip_versions=(4, 6)), indent=2) + "\n")
    return path


def capture_named(capture: Capture, name: str, description: str) -> Capture:
    capture.name, capture.description = name, description
    return capture


def _fragment4(pkt):
    from scapy.layers.inet import fragment
    return fragment(pkt, fragsize=256)


def _fragment6(pkt):
    from scapy.layers.inet6 import fragment6
    hop = pkt[IPv6ExtHdrHopByHop]
    rebuilt = IPv6(src=pkt[IPv6].src, dst=pkt[IPv6].dst) / hop.__class__() / IPv6ExtHdrFragment() / \
        IPv6ExtHdrDestOpt() / pkt[TCP]
    return fragment6(rebuilt, 512)


def _truncated_gzip(frames: list[Frame]) -> Path:
    """A gzip-compressed pcap whose last record is cut short, as a rotated capture can be."""
    capture = Capture("truncated_gzip", "", segments_of(frames), frames)
    plain = OUT / "truncated_gzip.pcap.tmp"
    port, t0 = next_slot()
    write_pcap(plain, tcp_packets(capture, sport=port), t0=t0)
    data = plain.read_bytes()
    plain.unlink()
    cut = data[:-30]  # the last packet (the final ACK) loses its last 30 bytes
    path = OUT / "truncated_gzip.pcap.gz"
    path.write_bytes(gzip.compress(cut, mtime=0))
    expected = expected_json(capture_named(capture, "truncated_gzip", "gzip-compressed pcap whose "
                             "last record is cut short: everything before it decodes, the damage "
                             "is reported"), path.name, ["EN10MB"], fmt="pcap.gz")
    expected["capture_issues"] = {"truncated-record": 1}
    path.with_suffix("").with_suffix(".expected.json")
    (OUT / "truncated_gzip.expected.json").write_text(json.dumps(expected, indent=2) + "\n")
    return path


if __name__ == "__main__":
    sys.exit(main())
