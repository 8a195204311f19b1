"""TCP reassembly: segments in capture order to one ordered byte stream per connection direction.

Per direction, bytes are placed by sequence number (32-bit wrap-around unwrapped to a growing
stream offset), duplicates and overlaps are delivered once (first copy wins; a retransmission whose
bytes differ is reported), and out-of-order segments wait in a buffer bounded by `window` bytes.
Bytes that were never captured become an explicit gap: when the window overflows, when the peer
acknowledges past a hole (HOLE_ACKS times), when a FIN lies beyond the data, or at the end of input. A SYN on a
4-tuple whose connection has closed (or whose ISN differs) starts a new connection; a capture
that starts mid-connection begins its stream at the first byte seen.

The consumer (`StreamSink`) gets, per direction 0 (from endpoint A, the first source seen) or 1:
data(direction, offset, bytes, ts_ns, capture, record), gap(direction, offset, size, ts_ns),
conflict(direction, offset, size, ts_ns) and, once, end(reason, ts_ns).
"""

from __future__ import annotations

import bisect
from array import array
from collections import deque
from typing import Callable

from amqpcap.capture.packets import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN, Segment
from amqpcap.settings import ReassemblySection

SEQ_MOD = 1 << 32
RECENT_BYTES = 64 * 1024  # delivered bytes kept to compare retransmissions against
# Peer ACKs past a hole before it is declared never captured. One could be a capture that merely
# reordered packets (the late segment still comes); three, like TCP's duplicate-ACK threshold,
# means the segment crossed the wire while the capture missed it.
HOLE_ACKS = 3


_DEFAULTS = ReassemblySection()  # the window and close grace a tracker has when not told (the settings' defaults)
NONE = -1  # an offset or sequence number not known yet (typed fields hold no None)

# The constants above again, as C values when compiled (tcp.pxd): on the path of every segment a
# flag test or a sequence wrap is then one instruction, not two module lookups and Python arithmetic.
# (The public names stay Python objects: other modules and tests import them.)
_FIN, _SYN, _RST, _ACK = TCP_FIN, TCP_SYN, TCP_RST, TCP_ACK
_SEQ_MOD, _NONE, _HALF_SEQ, _RECENT_BYTES = SEQ_MOD, NONE, 1 << 31, RECENT_BYTES


class StreamSink:
    """What a connection's reassembled bytes go to (amqpcap.connection.stream.AmqpConnection; tests'
    recorders). A base class, not a protocol: the compiled build calls its methods directly."""

    def data(self, direction: int, offset: int, data: bytes, ts_ns: int, capture: int, record: int) -> None:
        """`capture`: index of the capture file; `record`: the pcap record number of the packet in it."""
        raise NotImplementedError

    def gap(self, direction: int, offset: int, size: int, ts_ns: int) -> None:
        raise NotImplementedError

    def conflict(self, direction: int, offset: int, size: int, ts_ns: int) -> None:
        raise NotImplementedError

    def end(self, reason: str, ts_ns: int) -> None:
        raise NotImplementedError

    def earliest_pending(self, low: int) -> int:
        """The earliest time of what it holds that is still to come out as records, if before
        `low` (else `low`): what a time order of the records may release up to (amqpcap decode)."""
        return low


class HalfStream:
    """One direction of a connection."""

    __slots__ = ("direction", "sink", "window", "base", "next", "pending", "pending_bytes", "fin",
                 "recent", "recent_starts", "recent_at", "recent_first", "recent_end", "recent_bytes", "order",
                 "syn", "packets", "bytes", "duplicate_bytes", "hole_acks")

    def __init__(self, direction: int, sink: StreamSink, window: int) -> None:
        self.direction = direction
        self.sink = sink
        self.window = window
        self.base = NONE  # sequence number of stream offset 0
        self.next = 0  # stream offset of the next byte to deliver
        self.pending: list[tuple[int, int, bytes, int, int, int]] = []  # (offset, order, data, ts, capture, record)
        self.pending_bytes = 0
        self.fin = NONE  # stream offset of the FIN
        # The delivered segments kept to compare retransmissions with, and their stream offsets
        # (recent_starts[recent_first:recent_end]): machine integers, not a tuple and an int per
        # segment, which were freed 64 KB of the direction later, or after a closed connection's
        # grace, one by one, cold.
        self.recent: deque[bytes] = deque()
        self.recent_starts = array("q", bytes(8 * 8))
        self.recent_at = self.recent_starts  # (compiled: a typed view of it)
        self.recent_first = self.recent_end = 0
        self.recent_bytes = 0
        self.order = 0
        self.syn = False
        self.packets = 0
        self.bytes = 0
        self.duplicate_bytes = 0
        self.hole_acks = 0

    def offset(self, seq: int) -> int:
        """The stream offset of a sequence number: the unwrapped value nearest to `next`."""
        relative = (seq - self.base) % _SEQ_MOD
        return relative + ((self.next - relative + _HALF_SEQ) // _SEQ_MOD) * _SEQ_MOD

    def on_syn(self, seq: int) -> None:
        if self.base == _NONE or (not self.syn and self.next == 0):
            self.base = (seq + 1) % _SEQ_MOD
        self.syn = True

    def on_segment(self, seq: int, data: bytes, fin: bool, ts_ns: int, capture: int, record: int) -> None:
        self.packets += 1
        if not data and not fin:  # a pure ACK: nothing to place
            return
        if self.base == _NONE:
            self.base = seq  # mid-stream start: offset 0 is the first byte seen
        start = self.offset(seq)
        if fin:
            self.fin = start + len(data)
        if not data:
            return
        if start < self.next:
            data = self._trim(start, data, ts_ns)
            if not data:
                return
            start = self.next
        if start == self.next:
            self._deliver(start, data, ts_ns, capture, record)
            if self.pending:
                self._drain()
        else:
            bisect.insort(self.pending, (start, self.order, data, ts_ns, capture, record))
            self.order += 1
            self.pending_bytes += len(data)
            while self.pending_bytes > self.window:
                self._skip_to_pending()

    def on_ack_from_peer(self, ack: int) -> None:
        """The peer acknowledged up to `ack`: repeated past a hole, the hole will not be filled."""
        if self.pending and self.base != _NONE and self.offset(ack) >= self.pending[0][0]:
            self.hole_acks += 1
            if self.hole_acks >= HOLE_ACKS:
                self._skip_to_pending()

    # -- carried to the next run (amqpcap.onepass.state frames the blob) ---------------------------

    def saved(self, name, withhold_waiting: bool) -> dict:
        """This direction as plain data for the next run (`name`: capture index -> file name). Not
        the delivered bytes kept to compare retransmissions with: a retransmission across the runs'
        boundary is counted, not compared (they would hold any payload). `withhold_waiting`: the
        segments waiting out of order are not saved either (they are not framed yet, and from a
        client may hold credentials): the next run counts them as not captured."""
        pending = [] if withhold_waiting else self.pending
        return {"base": self.base, "next": self.next, "fin": self.fin, "syn": self.syn, "order": self.order,
                "pending": [(o, order, d, ts, name(c), r) for o, order, d, ts, c, r in pending],
                "pending_bytes": sum([len(item[2]) for item in pending]),
                "packets": self.packets, "bytes": self.bytes, "duplicate_bytes": self.duplicate_bytes,
                "hole_acks": self.hole_acks if pending else 0}

    def restore(self, state: dict, index) -> None:
        """This direction as `saved` left it (`index`: file name -> this run's capture index)."""
        self.base, self.next, self.fin, self.syn, self.order = (state["base"], state["next"], state["fin"],
                                                                state["syn"], state["order"])
        self.pending = [(o, order, d, ts, index(c), r) for o, order, d, ts, c, r in state["pending"]]
        self.pending_bytes = state["pending_bytes"]
        self.packets, self.bytes = state["packets"], state["bytes"]
        self.duplicate_bytes, self.hole_acks = state["duplicate_bytes"], state["hole_acks"]

    def earliest_pending(self, low: int) -> int:
        """The earliest time of the segments waiting out of order, if before `low`."""
        for pending in self.pending:  # (offset, order, data, ts_ns, capture, record)
            if pending[3] < low:
                low = pending[3]
        return low

    def flush(self, ts_ns: int) -> None:
        """No more segments will come: waiting data is delivered around its holes."""
        while self.pending:
            self._skip_to_pending()
        if self.fin != _NONE and self.fin > self.next:
            self.sink.gap(self.direction, self.next, self.fin - self.next, ts_ns)
            self.next = self.fin

    def _deliver(self, start: int, data: bytes, ts_ns: int, capture: int, record: int) -> None:
        self.next = start + len(data)
        self.bytes += len(data)
        recent = self.recent
        recent.append(data)
        if self.recent_end == len(self.recent_starts):
            self._room()
        self.recent_at[self.recent_end] = start
        self.recent_end += 1
        self.recent_bytes += len(data)
        while self.recent_bytes > _RECENT_BYTES and len(recent) > 1:
            self.recent_bytes -= len(recent.popleft())
            self.recent_first += 1
        self.sink.data(self.direction, start, data, ts_ns, capture, record)

    def _room(self) -> None:
        """Room for one more stream offset of a kept segment: those before recent_first moved
        out of the way, or a larger array."""
        first, kept = self.recent_first, self.recent_end - self.recent_first
        if first * 2 >= self.recent_end:
            at = self.recent_at
            for i in range(kept):  # (in place: the typed view keeps the array from being resized)
                at[i] = at[first + i]
        else:
            starts = array("q", bytes(16 * len(self.recent_starts)))
            starts[:kept] = self.recent_starts[first:self.recent_end]
            self.recent_starts = starts
            self.recent_at = starts
        self.recent_first, self.recent_end = 0, kept

    def _drain(self) -> None:
        self.hole_acks = 0
        while self.pending and self.pending[0][0] <= self.next:
            start, _, data, ts_ns, capture, record = self.pending.pop(0)
            self.pending_bytes -= len(data)
            if start < self.next:
                data = self._trim(start, data, ts_ns)
                if not data:
                    continue
            self._deliver(self.next, data, ts_ns, capture, record)

    def _trim(self, start: int, data: bytes, ts_ns: int) -> bytes:
        """What of a segment starting before `next` is new (the rest was delivered already: it is
        counted as duplicate and compared with the first copy)."""
        seen = min(len(data), self.next - start)
        self.duplicate_bytes += seen
        self._compare(start, data[:seen], ts_ns)
        return data[seen:]

    def _skip_to_pending(self) -> None:
        self.hole_acks = 0
        start, _, _, ts_ns, _, _ = self.pending[0]
        if start > self.next:
            self.sink.gap(self.direction, self.next, start - self.next, ts_ns)
            self.next = start
        self._drain()

    def _compare(self, start: int, data: bytes, ts_ns: int) -> None:
        """A retransmission must repeat what was delivered; report bytes that differ."""
        end, differing = start + len(data), 0
        at = self.recent_first
        for chunk in self.recent:
            chunk_start = self.recent_at[at]
            at += 1
            chunk_end = chunk_start + len(chunk)
            if chunk_end <= start or chunk_start >= end:
                continue
            lo, hi = max(start, chunk_start), min(end, chunk_end)
            ours, theirs = chunk[lo - chunk_start:hi - chunk_start], data[lo - start:hi - start]
            if ours != theirs:
                for i in range(hi - lo):
                    if ours[i] != theirs[i]:
                        differing += 1
        if differing:  # (a segment may start before the stream's first byte: its overlap starts at 0)
            self.sink.conflict(self.direction, max(start, 0), differing, ts_ns)


class TcpConnection:
    __slots__ = ("a", "b", "first_ts_ns", "last_ts_ns", "halves", "sink", "syn_from", "fins",
                 "rst", "closed_at", "ended", "first_capture", "streams", "stream_capture")

    def __init__(self, a: tuple[bytes, int], b: tuple[bytes, int], ts_ns: int, sink: StreamSink,
                 window: int) -> None:
        self.a, self.b = a, b
        self.first_ts_ns = self.last_ts_ns = ts_ns
        self.sink = sink
        self.halves = (HalfStream(0, sink, window), HalfStream(1, sink, window))
        self.syn_from: int | None = None  # direction that sent the SYN (the TCP client)
        self.fins = [False, False]
        self.rst = False
        self.closed_at: int | None = None
        self.ended = False
        self.first_capture = -1  # index of the capture file of its first packet
        self.streams: dict[int, int] = {}  # capture index -> its TCP stream index in that file (tcp.stream)
        self.stream_capture = -1  # the capture of the last packet (streams is looked up only on a change)

    @property
    def closed(self) -> bool:
        return self.rst or all(self.fins)

    def end(self, reason: str, ts_ns: int) -> None:
        if self.ended:
            return
        self.ended = True
        for half in self.halves:
            half.flush(ts_ns)
        self.sink.end(reason, ts_ns)
        # Nothing reaches the sink again. It and this connection refer to each other: a cycle only the
        # cyclic collector frees, which decoding runs seldom (gc_policy), so a night's ended
        # connections, with the bytes their halves keep, would pile up. Broken, they are freed as
        # soon as the tracker lets go of this connection.
        self.sink = None
        for half in self.halves:
            half.sink = None

    def end_reason(self) -> str:
        return "rst" if self.rst else "fin" if any(self.fins) else "capture-end"

    def saved(self, name, withhold_waiting: tuple) -> dict:
        """The connection as plain data for the next run (its halves: HalfStream.saved, each told
        whether to withhold its waiting segments)."""
        return {"a": self.a, "b": self.b, "first_ts_ns": self.first_ts_ns, "last_ts_ns": self.last_ts_ns,
                "syn_from": self.syn_from, "fins": list(self.fins), "rst": self.rst,
                "first_capture": name(self.first_capture), "streams": {name(c): n for c, n in self.streams.items()},
                "halves": [half.saved(name, withhold) for half, withhold in zip(self.halves, withhold_waiting)]}

    def restore(self, state: dict, index) -> bool:
        """The connection as `saved` left it; whether this run saw its other side first (its
        directions then swapped: the saved halves are restored the other way round)."""
        flipped = tuple(state["a"]) != self.a
        self.first_ts_ns, self.last_ts_ns = state["first_ts_ns"], state["last_ts_ns"]
        syn_from, fins = state["syn_from"], list(state["fins"])
        self.syn_from = 1 - syn_from if flipped and syn_from is not None else syn_from
        self.fins, self.rst = fins[::-1] if flipped else fins, state["rst"]
        self.first_capture = index(state["first_capture"])
        self.streams = {index(name): n for name, n in state["streams"].items()}
        halves = state["halves"][::-1] if flipped else state["halves"]
        for half, saved in zip(self.halves, halves):
            half.restore(saved, index)
        return flipped


SinkFactory = Callable[[TcpConnection], StreamSink]


def _direction(connection: TcpConnection, seg: Segment) -> int:
    """The segment's direction in the connection: 0 from `a`, 1 from `b`, -1 not between them."""
    a, b = connection.a, connection.b
    a_port, b_port = a[1], b[1]  # (compiled: C ints, compared without boxing the segment's ports)
    if seg.sport == a_port and seg.dport == b_port and seg.src == a[0] and seg.dst == b[0]:
        return 0
    if seg.sport == b_port and seg.dport == a_port and seg.src == b[0] and seg.dst == a[0]:
        return 1
    return -1


class TcpTracker:
    """Routes segments to connections; creates and ends connections."""

    def __init__(self, sink_factory: SinkFactory, window: int = _DEFAULTS.window_bytes,
                 close_grace_ns: int = int(_DEFAULTS.close_grace_seconds * 1e9), on_open=None) -> None:
        self.sink_factory = sink_factory
        self.on_open = on_open  # (connection, its first segment): a connection saved by an earlier run may resume
        self.window = window
        self.close_grace_ns = close_grace_ns
        self.connections: dict[tuple, TcpConnection] = {}
        # closed connections awaiting their grace period, in the order they closed
        self._closing: deque[TcpConnection] = deque()
        self._closing_since = 0  # when the first of them closed (a C integer compiled: tested per segment)
        self.ignored_packets = 0  # packets for no known connection that carry neither data nor SYN
        self.connections_seen = 0
        self.ended = 0  # connections ended so far
        # The last segment's connection, until it ends: most segments belong to the same one as the
        # segment before (83% of a busy capture's), which then needs no key and no lookup.
        self._last: TcpConnection | None = None

    def segment(self, seg: Segment, capture: int) -> None:
        last = self._last
        direction = _direction(last, seg) if last is not None else -1
        connection = last if direction >= 0 else self.connections.get((seg.src, seg.sport, seg.dst, seg.dport))
        flags = seg.flags
        if connection is not None and connection.closed_at is not None \
                and seg.ts_ns - connection.closed_at > self.close_grace_ns:
            # past its grace: ended, whether or not other connections' packets have expired it yet
            # (so what a connection becomes never depends on which others share its decoder)
            self._end(connection, connection.end_reason(), connection.last_ts_ns)
            connection = None
        if flags & _SYN and not flags & _ACK and connection is not None:
            half = connection.halves[_direction(connection, seg)]
            same_syn = half.syn and half.base == (seg.seq + 1) % _SEQ_MOD
            if not same_syn and (connection.closed or half.syn or half.next or half.pending):
                self._end(connection, "port-reuse" if not connection.closed else connection.end_reason(),
                          seg.ts_ns)
                connection = None
        if connection is None:
            if not seg.payload and not flags & _SYN:
                self.ignored_packets += 1
                return
            connection = self._open(seg)
            connection.first_capture = capture
            if self.on_open is not None:
                self.on_open(connection, seg)
        if connection is not last or direction < 0:
            direction = _direction(connection, seg)
        self._last = connection
        half = connection.halves[direction]
        connection.last_ts_ns = seg.ts_ns
        if capture != connection.stream_capture:
            connection.stream_capture = capture
            if seg.stream >= 0 and capture not in connection.streams:
                connection.streams[capture] = seg.stream
        if flags & _SYN:
            half.on_syn(seg.seq)
            if not flags & _ACK:
                connection.syn_from = direction
            half.packets += 1
            if seg.payload:  # data on a SYN (TFO) starts at offset 0
                half.on_segment((seg.seq + 1) % _SEQ_MOD, seg.payload, bool(flags & _FIN), seg.ts_ns, capture,
                                seg.record)
        else:
            half.on_segment(seg.seq, seg.payload, bool(flags & _FIN), seg.ts_ns, capture, seg.record)
        if flags & _ACK:
            other = connection.halves[1 - direction]
            if other.pending:
                other.on_ack_from_peer(seg.ack)
        if flags & (_FIN | _RST):
            if flags & _FIN:
                connection.fins[direction] = True
            if flags & _RST:
                connection.rst = True
            if connection.closed and connection.closed_at is None:
                connection.closed_at = seg.ts_ns
                if not self._closing:
                    self._closing_since = seg.ts_ns
                self._closing.append(connection)
        if self._closing and seg.ts_ns - self._closing_since > self.close_grace_ns:
            self._expire(seg.ts_ns)

    def finish(self) -> None:
        """End of input: every remaining connection ends ("capture-end" unless it closed)."""
        for connection in list(self._unique()):
            self._end(connection, connection.end_reason(), connection.last_ts_ns)
        self._closing.clear()  # every one has ended

    def _open(self, seg: Segment) -> TcpConnection:
        a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
        connection = TcpConnection(a, b, seg.ts_ns, None, self.window)  # type: ignore[arg-type]
        connection.sink = sink = self.sink_factory(connection)
        for half in connection.halves:
            half.sink = sink
        self.connections[(*a, *b)] = self.connections[(*b, *a)] = connection
        self.connections_seen += 1
        return connection

    def _end(self, connection: TcpConnection, reason: str, ts_ns: int) -> None:
        self.ended += 1
        if connection is self._last:
            self._last = None
        connection.end(reason, ts_ns)
        for key in ((*connection.a, *connection.b), (*connection.b, *connection.a)):
            if self.connections.get(key) is connection:
                del self.connections[key]

    def _expire(self, now_ns: int) -> None:
        closing = self._closing
        while closing and now_ns - closing[0].closed_at > self.close_grace_ns:
            connection = closing.popleft()
            if not connection.ended:  # a port reuse may have ended it already
                self._end(connection, connection.end_reason(), connection.last_ts_ns)
        if closing:
            self._closing_since = closing[0].closed_at

    def each_connection(self) -> list:
        """Every connection held, once, in no particular order (for a look at all of them, the
        decode view's watermark): each is held under (a, b) and (b, a), and taken under the first.
        Unlike _unique, no set of ids is kept."""
        return [connection for key, connection in self.connections.items()
                if key[1] == connection.a[1] and key[0] == connection.a[0]]

    def _unique(self):
        seen = set()
        for connection in self.connections.values():
            if id(connection) not in seen:
                seen.add(id(connection))
                yield connection
