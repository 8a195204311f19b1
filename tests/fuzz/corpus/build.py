"""Rebuild the reproducers in this directory (python -m tests.fuzz.corpus.build): each is the
smallest input found for one finding of the fuzz suite, built here from scratch (no sample bytes)
so it stays tiny and its provenance is plain. test_corpus.py replays every file and pins each
finding with a strict xfail test; README.md lists them.

File names say the target: codec-* (a frame for decode_frame), reader-* (a capture file for the
reader), stream-* (a capture for CaptureDecoder).
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

from tests.fuzz.mutators import ACK, FIN, PSH, SYN, Seg, frame, nested, write_pcap

HERE = Path(__file__).resolve().parent
CLIENT, SERVER = (bytes([10, 0, 0, 1]), 40000), (bytes([10, 0, 0, 2]), 5672)
T0 = 1_700_000_000 * 10**9
HEADER = b"AMQP\x00\x00\x09\x01"


def shortstr(value: bytes) -> bytes:
    return bytes([len(value)]) + value


def method(class_id: int, method_id: int, args: bytes, channel: int = 0) -> bytes:
    return frame(1, channel, struct.pack(">HH", class_id, method_id) + args)


def publish(channel: int = 1) -> bytes:
    return method(60, 40, struct.pack(">H", 0) + shortstr(b"") + shortstr(b"q") + b"\x00", channel)


def content_header(body_size: int, channel: int = 1) -> bytes:
    return frame(2, channel, struct.pack(">HHQH", 60, 0, body_size, 0))


def conversation(client_data: list[bytes], server_data: list[bytes] = (), client=CLIENT, server=SERVER,
                 client_isn: int = 1000, server_isn: int = 5000) -> list[Seg]:
    """A TCP connection: handshake, the client's segments, the server's, FINs."""
    segments = [Seg(T0, client, server, client_isn, 0, SYN, b""),
                Seg(T0 + 1000, server, client, server_isn, client_isn + 1, SYN | ACK, b""),
                Seg(T0 + 2000, client, server, client_isn + 1, server_isn + 1, ACK, b"")]
    c, s, t = client_isn + 1, server_isn + 1, T0 + 3000
    for payload in client_data:
        segments.append(Seg(t, client, server, c, s, ACK | PSH, payload))
        c, t = c + len(payload), t + 1000
    for payload in server_data:
        segments.append(Seg(t, server, client, s, c, ACK | PSH, payload))
        s, t = s + len(payload), t + 1000
    segments += [Seg(t, client, server, c, s, FIN | ACK, b""), Seg(t + 1000, server, client, s, c + 1, FIN | ACK, b"")]
    return segments


def pcap(records: list[tuple[int, int, bytes]], origlens: list[int] | None = None) -> bytes:
    """A microsecond pcap of (seconds, microseconds, data)."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)]
    for i, (sec, usec, data) in enumerate(records):
        origlen = len(data) if origlens is None else origlens[i]
        out.append(struct.pack("<IIII", sec, usec, len(data), origlen) + data)
    return b"".join(out)


def ether_frames(count: int) -> list[bytes]:
    """Ethernet frames with zeroed MAC addresses (a loopback capture's), of different sizes."""
    return [bytes(12) + b"\x08\x00" + bytes([i + 1]) * (40 + i) for i in range(count)]


def block(block_type: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    return struct.pack("<II", block_type, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))


def shb() -> bytes:
    return block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))


def idb(link_type: int) -> bytes:
    return block(1, struct.pack("<HHI", link_type, 0, 262144))


def epb(interface: int, ticks: int, data: bytes) -> bytes:
    return block(6, struct.pack("<IIIII", interface, ticks >> 32, ticks & 0xFFFFFFFF, len(data), len(data)) + data)


def build() -> dict[str, bytes]:
    files: dict[str, bytes] = {}

    # F1 (fixed): a field table nested 260 levels deep decoded, but orjson (--jsonl, args_json) stops at 255
    declare = method(50, 10, struct.pack(">H", 0) + shortstr(b"q") + b"\x02" + nested(260), 1)
    files["codec-deep-field-table.frame"] = declare
    files["stream-deep-field-table.pcap"] = write_pcap(conversation([HEADER, declare]))

    # F2: garbage before a pcap record makes a plausible header; the boundary search after it
    # starts 16 bytes on, past the real record
    # (the first record one byte long: shifted by the garbage byte, its header claims 256 bytes,
    # which end inside the 0xff bytes of a later record, where no header is plausible)
    tiny = pcap([(1_700_000_000, 5 + i, b"\x01" if i == 0 else b"\xff" * 40) for i in range(8)])
    files["reader-garbage-before-first-record.pcap"] = tiny[:24] + b"\x5a" + tiny[24:]
    records = [(1_700_000_000, 5 + i, data) for i, data in enumerate(ether_frames(6))]
    clean = pcap(records)
    second = 24 + 16 + len(records[0][2])
    torn = clean[second:second + 13]  # the first 13 bytes of record 1's own header, written twice
    files["reader-torn-header-before-record.pcap"] = clean[:second] + torn + clean[second:]

    # F3: a two-member gzip stream (the first member one byte long) cut inside its second member
    files["reader-gzip-two-members-cut.pcap.gz"] = (gzip.compress(clean[:1], mtime=0) +
                                                    gzip.compress(clean[1:], mtime=0))[:-40]

    # F4: a pcapng read in a byte range meets a packet naming an undescribed interface: IndexError
    packets = ether_frames(3)
    files["reader-pcapng-range-unknown-interface.pcapng"] = shb() + idb(1) + epb(0, 10**15, packets[0]) + \
        epb(1, 10**15 + 1, packets[1]) + epb(0, 10**15 + 2, packets[2])

    # F5: damage between the section header and the interface blocks: a byte range that starts
    # after them numbers the interfaces wrongly (silently: other link types)
    files["reader-pcapng-range-interfaces-after-damage.pcapng"] = shb() + b"\x5a" + idb(1) + idb(113) + \
        b"".join(epb(i % 2, 10**15 + i, data) for i, data in enumerate(ether_frames(6)))

    # F6: the first record's origlen is below its caplen (the origlen rule is then off) and record
    # 3's time jumps three days: the reader resumes at headers read 4 bytes late
    frames6 = ether_frames(8)
    shifted = [(1_700_000_000 + (3 * 86400 if i == 3 else 0), 1000 + i, data) for i, data in enumerate(frames6)]
    files["reader-shifted-headers.pcap"] = pcap(shifted, [len(d) - (1 if i == 0 else 0) for i, d in enumerate(frames6)])

    # F7: on a port that is no AMQP port, the client's protocol header in two segments
    other = (SERVER[0], 15999)
    start = method(10, 10, b"\x00\x09" + struct.pack(">I", 0) + struct.pack(">I", 5) + b"PLAIN" +
                   struct.pack(">I", 5) + b"en_US")
    files["stream-split-protocol-header.pcap"] = write_pcap(conversation([HEADER[:1], HEADER[1:]], [start],
                                                                         server=other))

    # F8 (fixed): a damaged capture file (garbage between two records) read by `amqpcap decode` without --jsonl
    heartbeat = frame(8, 0, b"")
    segments = conversation([HEADER, heartbeat, heartbeat])
    capture = write_pcap(segments)
    cut = len(capture) - 2 * (16 + 54)  # before the two FIN records (54-byte packets: no payload)
    files["stream-damaged-file-readable.pcap"] = capture[:cut] + b"garbage!" + capture[cut:]

    # F9: with --bodies, a body frame claiming 64 KiB or more streams into the message's body; the
    # stream ends inside it: body_b64 holds bytes that body_received does not count
    body = frame(3, 1, b"x" * 18)
    body = body[:3] + struct.pack(">I", 65554) + body[7:]
    files["stream-streamed-body-truncated.pcap"] = write_pcap(conversation([HEADER, publish(), content_header(18), body]))

    # F10: a segment whose sequence number lies before the stream's first byte, with bytes that
    # differ where it overlaps: a retransmission-conflict issue at a negative stream offset
    segments = conversation([HEADER, heartbeat])
    early = Seg(T0 + 9000, CLIENT, SERVER, 1001 - 4, 5001, ACK, b"xxxxAMQX")
    files["stream-conflict-before-start.pcap"] = write_pcap(segments[:5] + [early] + segments[5:])

    # F11: a streamed body frame (64 KiB or more) with a segment lost inside it, then a bad frame-end
    # octet: the framing issue counts the lost bytes the gap issue already counted
    payload = bytes(70000)
    big = frame(3, 1, payload)[:-1] + b"\x00"  # frame-end 0x00
    stream = HEADER + publish() + content_header(len(payload)) + big + heartbeat
    pieces = [stream[i:i + 1448] for i in range(0, len(stream), 1448)]
    segments = conversation(pieces)
    del segments[3 + 20]  # a segment inside the body frame, never captured
    files["stream-streamed-body-gap-bad-end.pcap.gz"] = gzip.compress(write_pcap(segments), mtime=0)

    # F12: a pcapng packet whose timestamp's high word is damaged: its time (past 2262) is more than
    # the compiled packet parser's 64 bits hold: OverflowError, exit 70, every file of the run lost
    capture = write_pcap(conversation([HEADER, heartbeat, heartbeat]))
    blocks, p = [], 24
    while p < len(capture):
        sec, nsec, caplen, _ = struct.unpack_from("<IIII", capture, p)
        ticks = (sec * 10**9 + nsec) // 1000  # the interface's default resolution: microseconds
        blocks.append(epb(0, ticks | (0xFFFFFFFF << 32 if len(blocks) == 4 else 0), capture[p + 16:p + 16 + caplen]))
        p += 16 + caplen
    files["stream-pcapng-time-beyond-64-bits.pcapng"] = shb() + idb(1) + b"".join(blocks)

    # F13: a pcapng read in byte ranges, a range whose first packet has no time of its own (here an
    # unreadable timestamp): a whole read gives it the previous packet's time, the range had none
    # to give (0: 1970) and did not say so
    frames = ether_frames(3)
    files["reader-pcapng-range-starts-untimed.pcapng"] = shb() + idb(1) + epb(0, 1_700_000_000 * 10**6, frames[0]) + \
        epb(0, 0xFFFFFFFF << 32, frames[1]) + epb(0, 1_700_000_001 * 10**6, frames[2])

    # F14: a copy of a later block's header (a torn write) just before a block 16 bytes shorter than
    # that later one: the copy's claimed length ends exactly on the later block's length field, so its
    # lengths agree; taken as one damaged block, its skip ran past the start of the later block
    a, b, c, d = (bytes(12) + b"\x08\x00" + bytes([i + 1]) * size for i, size in enumerate((40, 42, 58, 44)))
    later = epb(0, 1_700_000_002 * 10**6, c)
    files["reader-pcapng-copied-header-agrees.pcapng"] = shb() + idb(1) + epb(0, 1_700_000_000 * 10**6, a) + \
        later[:8] + epb(0, 1_700_000_001 * 10**6, b) + later + epb(0, 1_700_000_003 * 10**6, d)
    return files


def main() -> None:
    for name, data in build().items():
        (HERE / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
