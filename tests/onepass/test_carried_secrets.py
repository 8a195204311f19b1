"""No credential is ever carried from one run to the next (issue 51, item 1).

Every method whose arguments hold a secret (connection.start-ok with PLAIN and with AMQPLAIN,
secure-ok, RabbitMQ's update-secret) is cut by the end of a run at every byte offset of its frame;
neither the state saved (decompressed) nor any row of either run holds four consecutive bytes of
the secret, the connection resumes, and every byte of the client's stream is still either decoded
or skipped. Also the two places where bytes wait unframed at a run's end: a resynchronisation
still judging candidates, and segments waiting out of order in the TCP layer."""

from __future__ import annotations

import struct
import zlib
from collections import defaultdict

import pytest

from amqpcap.capture.packets import Segment
from amqpcap.connection.framing import READER_STATES
from amqpcap.onepass.carry import CarryingDecoder
from amqpcap.protocol.codec import Codec
from amqpcap.protocol.redact import SECRET_FIELDS
from amqpcap.settings import Settings
from tests.fuzz.corpus.build import HEADER, method, shortstr
from tests.fuzz.mutators import frame
from tests.helpers.secrets import leaks

SECRET = b"Zq7-Wv9!Ux4#Ty2$"  # no four bytes of it occur in frames, names or tables by chance
CLIENT, SERVER = (bytes([10, 0, 0, 1]), 40000), (bytes([10, 0, 0, 2]), 5672)
ACK, PSH, SYN, FIN = 0x10, 0x08, 0x02, 0x01
T0 = 1_700_000_000 * 10**9


def longstr(value: bytes) -> bytes:
    return struct.pack(">I", len(value)) + value


def table_entries(**values: bytes) -> bytes:
    return b"".join(shortstr(k.encode()) + b"S" + longstr(v) for k, v in values.items())


def start_ok(mechanism: bytes, response: bytes) -> bytes:
    properties = table_entries(product=b"test")
    return method(10, 11, longstr(properties) + shortstr(mechanism) + longstr(response) + shortstr(b"en_US"))


SECRET_FRAMES = {
    "start-ok PLAIN": start_ok(b"PLAIN", b"\0amqpcap\0" + SECRET),
    "start-ok AMQPLAIN": start_ok(b"AMQPLAIN", table_entries(LOGIN=b"amqpcap", PASSWORD=SECRET)),
    "secure-ok": method(10, 21, longstr(b"challenge answer " + SECRET)),
    "update-secret": method(10, 70, longstr(SECRET) + shortstr(b"token refreshed")),
}
TUNE_OK = method(10, 31, struct.pack(">HIH", 2047, 131072, 60))
OPEN = method(10, 40, shortstr(b"/") + shortstr(b"") + b"\x00")
HEARTBEAT = frame(8, 0, b"")
START = method(10, 10, b"\x00\x09" + longstr(b"") + longstr(b"PLAIN AMQPLAIN") + longstr(b"en_US"))


def test_the_secret_frames_of_this_test_are_every_method_redaction_knows():
    """The cases below cover each method the codec calls secret (one list of them: redact's)."""
    codec = Codec.for_version("0-9-1")
    assert {bytes(f[7:11]) for f in SECRET_FRAMES.values()} == set(codec.secret_ids)
    assert len(codec.secret_ids) == len(SECRET_FIELDS)


def segment(ts: int, src, dst, seq: int, ack: int, flags: int, payload: bytes = b"") -> Segment:
    return Segment(ts, src[0], src[1], dst[0], dst[1], seq % 2**32, ack % 2**32, flags, payload)


def client_stream(secret_frame: bytes, before_secret: bytes) -> bytes:
    return HEADER + before_secret + secret_frame + HEARTBEAT


def nights(stream: bytes, cut: int, server: bytes = START):
    """The connection's segments, the first night's ending with the client's stream[:cut]."""
    c, s = 1001, 5001
    first = [segment(T0, CLIENT, SERVER, c - 1, 0, SYN), segment(T0 + 1000, SERVER, CLIENT, s - 1, c, SYN | ACK),
             segment(T0 + 2000, CLIENT, SERVER, c, s, ACK), segment(T0 + 3000, SERVER, CLIENT, s, c, ACK | PSH, server)]
    s += len(server)
    if cut:
        first.append(segment(T0 + 4000, CLIENT, SERVER, c, s, ACK | PSH, stream[:cut]))
    second = [segment(T0 + 10**9, CLIENT, SERVER, c + cut, s, ACK | PSH, stream[cut:])]
    return first, second


def decode(segments, names, saved=(), before_the_end=lambda decoder: None):
    rows = defaultdict(list)
    decoder = CarryingDecoder(Settings(), names, lambda table, row: rows[table.name].append(dict(row)),
                              saved=saved)
    for item in segments:
        decoder.feed(item, 0)
    before_the_end(decoder)
    states = decoder.finish(segments[-1].ts_ns, names[0])
    return rows, states, decoder


def client_accounts(rows, stream_bytes: int) -> None:
    (streams,) = rows["streams"]
    assert streams["c2s_stream_bytes"] == stream_bytes
    assert streams["c2s_decoded_bytes"] + streams["c2s_skipped_bytes"] == stream_bytes


@pytest.mark.parametrize("case", sorted(SECRET_FRAMES))
def test_a_secret_frame_cut_at_any_byte_by_a_runs_end_is_never_carried(case):
    secret_frame = SECRET_FRAMES[case]
    before = SECRET_FRAMES["start-ok PLAIN"] + TUNE_OK + OPEN if case == "update-secret" else b""
    stream = client_stream(secret_frame, before)
    start = len(HEADER) + len(before)
    for cut in range(start, start + len(secret_frame) + 1):
        first, second = nights(stream, cut)
        first_rows, (state,), _ = decode(first, ["a.pcap"])
        assert not leaks(zlib.decompress(state.blob), SECRET), (case, cut)
        assert not leaks(repr(dict(first_rows)).encode(), SECRET), (case, cut)
        rows, _, resumed = decode(second, ["b.pcap"], saved=[state])
        assert [r.connection for r in resumed.resumed] == [state.connection], (case, cut)
        assert not leaks(repr(dict(rows)).encode(), SECRET), (case, cut)
        client_accounts(rows, len(stream))
        lost = [r for r in rows["decode_issues"] if "credentials" in (r["detail"] or "")]
        cut_inside = start + 7 < cut < start + len(secret_frame)  # past the header: its ids have come
        assert [r["bytes_skipped"] for r in lost] == ([len(secret_frame)] if cut_inside else []), (case, cut)
        name = "connection.start-ok" if case.startswith("start-ok") else f"connection.{case}"
        decoded = [r for r in first_rows["frames"] + rows["frames"] if r["method"] == name]
        assert len(decoded) == (0 if cut_inside else 1), (case, cut)


def test_a_frame_that_holds_no_secret_is_carried_whole():
    """Only the secret methods are withheld: a queue.declare cut the same way decodes whole in the
    next run (a cut method frame of another class is carried, not lost)."""
    declare = method(50, 10, struct.pack(">H", 0) + shortstr(b"orders") + b"\x00" + longstr(b""), 1)
    stream = client_stream(declare, b"")
    cut = len(HEADER) + 12
    first, second = nights(stream, cut)
    _, (state,), _ = decode(first, ["a.pcap"])
    assert declare[:12] in zlib.decompress(state.blob)
    rows, _, _ = decode(second, ["b.pcap"], saved=[state])
    assert [r["method"] for r in rows["frames"] if r["kind"] == "method"] == ["queue.declare"]
    assert not rows["decode_issues"]


def test_bytes_a_resynchronisation_still_judges_at_a_runs_end_are_not_carried():
    """A capture that starts inside an update-secret (no SYN: mid-stream): the secret's bytes hold
    a plausible frame start, so the resynchronisation keeps them waiting when the run ends. They are
    dropped, not saved; the next run goes on resynchronising and finds the frames that follow."""
    decoy = b"\x01\x00\x01\x00\x00\x00\x20"  # a method frame's header on channel 1: undecidable yet
    secret_frame = method(10, 70, longstr(SECRET + decoy + SECRET) + shortstr(b"r"))
    stream = secret_frame[20:] + HEARTBEAT + HEARTBEAT + OPEN
    c, s = 777_001, 5001
    first = [segment(T0, SERVER, CLIENT, s, c, ACK | PSH, HEARTBEAT),
             segment(T0 + 1000, CLIENT, SERVER, c, s + 8, ACK | PSH, stream[:len(secret_frame) - 20 - 4])]

    def held(decoder):  # (what the test is about: the secret's bytes wait in the resynchronisation)
        (connection,) = [tcp.sink for tcp in decoder.decoder.tracker._unique()]
        reader = connection.readers[connection.client]
        assert reader.state == READER_STATES["resync"] and SECRET[:8] in bytes(reader.buffer.buf)

    rows, states, _ = decode(first, ["a.pcap"], before_the_end=held)
    (state,) = states
    assert not leaks(zlib.decompress(state.blob), SECRET)
    rest = len(secret_frame) - 24
    second = [segment(T0 + 10**9, CLIENT, SERVER, c + rest, s + 8, ACK | PSH, stream[rest:])]
    rows, _, resumed = decode(second, ["b.pcap"], saved=[state])
    assert resumed.resumed
    client_accounts(rows, len(stream))
    assert [r["method"] for r in rows["frames"] if r["kind"] == "method"] == ["connection.open"]
    assert any("may carry credentials" in (r["detail"] or "") for r in rows["decode_issues"])


def test_client_segments_waiting_out_of_order_at_a_runs_end_are_not_carried():
    """The second half of a start-ok arrives before its first half, and the run ends between them:
    the waiting half is not saved; the next run counts it as never captured."""
    secret_frame = SECRET_FRAMES["start-ok PLAIN"]
    stream = client_stream(secret_frame + TUNE_OK, b"")
    split = len(HEADER) + len(secret_frame) - 12
    first, _ = nights(stream, len(HEADER))
    c, s = 1001, 5001 + len(START)
    first.append(segment(T0 + 5000, CLIENT, SERVER, c + split, s, ACK | PSH, stream[split:len(stream) - 8]))
    rows, (state,), _ = decode(first, ["a.pcap"])
    assert not leaks(zlib.decompress(state.blob), SECRET[-5:] + b"\x05en_US")
    second = [segment(T0 + 10**9, CLIENT, SERVER, c + len(HEADER), s, ACK | PSH, stream[len(HEADER):split]),
              segment(T0 + 10**9 + 1000, CLIENT, SERVER, c + len(stream) - 8, s, ACK | PSH, stream[-8:]),
              segment(T0 + 10**9 + 2000, CLIENT, SERVER, c + len(stream), s, ACK | FIN)]
    rows, _, resumed = decode(second, ["b.pcap"], saved=[state])
    assert resumed.resumed
    client_accounts(rows, len(stream))
    assert not leaks(repr(dict(rows)).encode(), SECRET)
    assert [r["method"] for r in rows["frames"] if r["kind"] == "method"] == []
    assert sum(r["kind"] == "heartbeat" for r in rows["frames"]) == 1
