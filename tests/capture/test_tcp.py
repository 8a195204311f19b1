"""TCP reassembly on hand-made segments: what reaches the stream, what is reported as lost."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from amqpcap.capture.packets import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN, Segment, packed_columns, segments_from_packed
from amqpcap.capture.tcp import HOLE_ACKS, RECENT_BYTES, SEQ_MOD, StreamSink, TcpTracker

A, B = (b"\x0a\x00\x00\x01", 40000), (b"\x0a\x00\x00\x02", 5672)


class Recorder(StreamSink):
    def __init__(self, connection) -> None:
        self.connection = connection
        self.events: list[tuple] = []

    def data(self, direction, offset, data, ts_ns, capture, record):
        self.events.append(("data", direction, offset, bytes(data)))

    def gap(self, direction, offset, size, ts_ns):
        self.events.append(("gap", direction, offset, size))

    def conflict(self, direction, offset, size, ts_ns):
        self.events.append(("conflict", direction, offset, size))

    def end(self, reason, ts_ns):
        self.events.append(("end", reason))

    def stream(self, direction=0) -> bytes:
        return b"".join(e[3] for e in self.events if e[0] == "data" and e[1] == direction)


class Harness:
    def __init__(self, **kwargs) -> None:
        self.sinks: list[Recorder] = []
        self.tracker = TcpTracker(self._sink, **kwargs)
        self.ts = 0

    def _sink(self, connection):
        self.sinks.append(Recorder(connection))
        return self.sinks[-1]

    def send(self, src, dst, seq, data=b"", flags=TCP_ACK, ack=0):
        self.ts += 1000
        self.tracker.segment(Segment(self.ts, src[0], src[1], dst[0], dst[1], seq % SEQ_MOD, ack % SEQ_MOD,
                                     flags, data), 0)


def handshake(h: Harness, isn_a=1000, isn_b=9000):
    h.send(A, B, isn_a, flags=TCP_SYN)
    h.send(B, A, isn_b, flags=TCP_SYN | TCP_ACK, ack=isn_a + 1)
    h.send(A, B, isn_a + 1, ack=isn_b + 1)


def test_in_order_and_out_of_order_give_the_same_stream():
    h = Harness()
    handshake(h)
    h.send(A, B, 1001, b"hello ")
    h.send(A, B, 1013, b"world")  # early
    h.send(A, B, 1007, b"there ")  # fills the hole
    h.tracker.finish()
    assert h.sinks[0].stream() == b"hello there world"
    assert not [e for e in h.sinks[0].events if e[0] == "gap"]


def test_duplicates_and_overlaps_deliver_each_byte_once():
    h = Harness()
    handshake(h)
    h.send(A, B, 1001, b"abcdef")
    h.send(A, B, 1001, b"abcdef")  # exact retransmission
    h.send(A, B, 1004, b"defghi")  # overlaps the tail
    h.tracker.finish()
    assert h.sinks[0].stream() == b"abcdefghi"
    assert h.sinks[0].connection.halves[0].duplicate_bytes == 9


def test_retransmission_with_other_bytes_is_reported_first_copy_kept():
    h = Harness()
    handshake(h)
    h.send(A, B, 1001, b"abcdef")
    h.send(A, B, 1003, b"XY")
    h.tracker.finish()
    assert h.sinks[0].stream() == b"abcdef"
    assert ("conflict", 0, 2, 2) in h.sinks[0].events


def _kept(segments: list[tuple[int, bytes]]) -> dict[int, int]:
    """Reference: stream offset -> byte of the delivered segments a retransmission is compared
    with: the latest whose sizes add up to at most RECENT_BYTES, and always the last one."""
    kept, size = [], 0
    for segment in segments:
        kept.append(segment)
        size += len(segment[1])
        while size > RECENT_BYTES and len(kept) > 1:
            size -= len(kept.pop(0)[1])
    return {offset + i: byte for offset, data in kept for i, byte in enumerate(data)}


@settings(max_examples=60, deadline=None, derandomize=True)
@given(sizes=st.lists(st.one_of(st.integers(1, 9000), st.integers(60000, 70000)), min_size=1, max_size=60),
       gaps=st.sets(st.integers(0, 59), max_size=4), back=st.integers(1, 2 * RECENT_BYTES),
       length=st.integers(1, 2 * RECENT_BYTES), stride=st.integers(1, 7))
@example(sizes=[100] * 40 + [9000] * 20, gaps={5, 33}, back=70000, length=2 * RECENT_BYTES, stride=3)
@example(sizes=[1, 700, 3000, 65000, 2, 9000] * 10, gaps={0, 17, 40}, back=2 * RECENT_BYTES, length=90000, stride=1)
def test_a_retransmission_is_compared_with_the_bytes_kept_however_many_segments_passed(sizes, gaps, back, length,
                                                                                       stride):
    """Segments delivered (some after a hole declared never captured), each followed by a
    retransmission of earlier bytes with every stride-th one changed: the bytes reported as
    differing are those changed among the bytes still kept (the latest segments adding up to
    RECENT_BYTES at most, at least the last), however the kept ones were cut."""
    h = Harness(window=0)
    handshake(h)
    seq, delivered, offset, stream = 1001, [], 0, {}
    for i, size in enumerate(sizes):
        if i in gaps:  # a hole: the window (none) overflows at once, the hole becomes a gap
            seq, offset = seq + 7, offset + 7
        data = bytes((i * 31 + k) % 251 for k in range(size))
        h.send(A, B, seq, data)
        delivered.append((offset, data))
        stream.update((offset + k, b) for k, b in enumerate(data))
        seq, offset = seq + size, offset + size
        start = max(0, offset - back)
        original = bytes(stream.get(start + k, 0) for k in range(min(length, offset - start)))
        again = bytes(b ^ 0xFF if k % stride == 0 else b for k, b in enumerate(original))
        before = len(h.sinks[0].events)
        h.send(A, B, 1001 + start, again)  # (sequence numbers are stream offsets + 1001, holes included)
        kept = _kept(delivered)
        expected = sum(1 for k, b in enumerate(again) if start + k in kept and kept[start + k] != b)
        conflicts = [e for e in h.sinks[0].events[before:] if e[0] == "conflict"]
        assert conflicts == ([("conflict", 0, start, expected)] if expected else [])


def test_sequence_numbers_wrap_around():
    h = Harness()
    isn = SEQ_MOD - 4
    handshake(h, isn_a=isn)
    h.send(A, B, isn + 1, b"abc")
    h.send(A, B, isn + 4, b"defg")  # crosses 2**32
    h.send(A, B, isn + 11, b"hij")
    h.tracker.finish()
    assert h.sinks[0].stream() == b"abcdefghij"


def test_hole_reported_after_repeated_acks_past_it():
    h = Harness()
    handshake(h)
    h.send(A, B, 1001, b"aaaa")
    h.send(A, B, 1009, b"cccc")  # bytes 1005..1008 never captured
    for _ in range(HOLE_ACKS - 1):
        h.send(B, A, 9001, ack=1013)
    assert ("gap", 0, 4, 4) not in h.sinks[0].events  # one or two ACKs could be capture reordering
    h.send(B, A, 9001, ack=1013)
    assert ("gap", 0, 4, 4) in h.sinks[0].events
    assert h.sinks[0].stream() == b"aaaacccc"


def test_window_overflow_declares_the_gap():
    h = Harness(window=10)
    handshake(h)
    h.send(A, B, 1001, b"a")
    h.send(A, B, 1003, b"x" * 6)
    h.send(A, B, 1009, b"y" * 6)  # 12 bytes waiting > window 10
    assert ("gap", 0, 1, 1) in h.sinks[0].events


def test_data_before_a_fin_never_captured_is_a_gap():
    h = Harness()
    handshake(h)
    h.send(A, B, 1001, b"abc")
    h.send(A, B, 1010, flags=TCP_FIN | TCP_ACK)  # FIN at offset 9: 6 bytes missing
    h.tracker.finish()
    assert ("gap", 0, 3, 6) in h.sinks[0].events
    assert ("end", "fin") in h.sinks[0].events


def test_port_reuse_after_close_starts_a_new_connection():
    h = Harness()
    handshake(h)
    h.send(A, B, 1001, b"first")
    h.send(A, B, 1006, flags=TCP_FIN | TCP_ACK)
    h.send(B, A, 9001, flags=TCP_FIN | TCP_ACK)
    handshake(h, isn_a=555_000, isn_b=777_000)
    h.send(A, B, 555_001, b"second")
    h.tracker.finish()
    assert [s.stream() for s in h.sinks] == [b"first", b"second"]
    assert h.sinks[0].events[-1] == ("end", "fin")


def test_new_syn_on_a_live_tuple_ends_the_old_connection():
    h = Harness()
    h.send(A, B, 5000, b"mid-stream")  # no handshake seen
    handshake(h, isn_a=100)
    h.send(A, B, 101, b"new")
    h.tracker.finish()
    assert [s.stream() for s in h.sinks] == [b"mid-stream", b"new"]
    assert h.sinks[0].events[-1] == ("end", "port-reuse")


def test_rst_ends_and_mid_stream_starts_at_first_byte():
    h = Harness()
    h.send(B, A, 7777, b"xyz")
    h.send(A, B, 1234, flags=TCP_RST)
    h.tracker.finish()
    (sink,) = h.sinks
    assert sink.stream(0) == b"xyz" and sink.events[-1] == ("end", "rst")
    assert sink.connection.syn_from is None


@pytest.mark.parametrize("grace_ns, ended_before_finish", [(0, True), (10**12, False)])
def test_closed_connections_are_finalised_after_the_grace_period(grace_ns, ended_before_finish):
    h = Harness(close_grace_ns=grace_ns)
    handshake(h)
    h.send(A, B, 1001, b"abc", flags=TCP_RST)
    h.send((b"\x0a\x00\x00\x09", 1), B, 1, b"other")  # time moves on
    assert h.sinks[0].connection.ended == ended_before_finish


def test_packed_segments_come_back_numbered_as_the_file_shows_them():
    """The Spark job's decode stage makes its segments from staged columns in one call per batch
    (segments_from_packed, packed_columns' inverse): every field, the pcap record number after
    `base`, the file's TCP stream of its local stream (-1 where the map ends: not numbered)."""
    made = [Segment(10, A[0], A[1], B[0], B[1], 7, 0, TCP_SYN, b""),
            Segment(11, B[0], B[1], A[0], A[1], 90, 8, TCP_SYN | TCP_ACK, b""),
            Segment(12, A[0], A[1], B[0], B[1], 2**32 - 1, 91, TCP_ACK, b"AMQP\x00\x00\x09\x01"),
            Segment(-5, bytes(16), 65535, bytes(range(16)), 1, 0, 2**32 - 1, 0xFF, bytes(range(256)) * 3)]
    for segment, (record, stream) in zip(made, [(0, 3), (1, 3), (5, 4), (6, 0)]):
        segment.record, segment.stream = record, stream
    names = ("ts_ns", "src", "sport", "dst", "dport", "seq", "ack", "flags", "payload")
    got = segments_from_packed(packed_columns(made), 100, [5, 9, 2, 17])
    assert [[getattr(s, name) for name in names] for s in got] == [[getattr(s, name) for name in names] for s in made]
    assert [(s.record, s.stream) for s in got] == [(101, 17), (102, 17), (106, -1), (107, 5)]
    assert segments_from_packed(packed_columns([]), 0, []) == []


def test_packed_segments_share_one_object_per_address():
    """A batch's segments hold each address as the object made when it was first met (lookups keyed
    by it hash it once), unless an address with the same last byte came since; compiled, equal
    values only (an IPv4 address that is an IPv6 one's tail is not it)."""
    c, d = b"\x0a\x00\x00\x41", b"\x0a\x00\x01\x41"  # the same slot
    six = bytes(12) + A[0]
    made = [Segment(i, src, 1, dst, 2, 0, 0, TCP_ACK, b"")
            for i, (src, dst) in enumerate([(A[0], B[0]), (B[0], A[0]), (c, B[0]), (d, B[0]), (d, c), (six, A[0])])]
    got = segments_from_packed(packed_columns(made), 0, [])
    assert [(s.src, s.dst) for s in got] == [(s.src, s.dst) for s in made]
    assert got[1].src is got[0].dst and got[1].dst is got[0].src and got[2].dst is got[0].dst
    assert got[3].src is not got[2].src and got[4].src is got[3].src  # c's slot went to d
    assert got[5].src == six and got[5].dst == A[0] and got[5].dst is not got[0].src  # six took A's slot
