"""AMQP framing of one direction of a connection: its bytes in, frames out to the connection.

A `FrameReader` is a state machine with one method per state (`ReaderState`): before the protocol
header (`_starting`), framing (`_framing`: the codec decodes frame after frame), resynchronising
after a gap or a mid-stream start (`_resyncing`: on the first offset where a frame header, its size
and its frame-end agree and the next frame agrees too), streaming a large body frame as it arrives
(`_feed_body`: bodies larger than `STREAM_BODY_MIN` are hashed, never buffered whole, so a gap inside
one costs only the bytes lost), skipping the rest of a frame a gap cut (`_skipping`), walking AMQP
1.0's frames by their headers (`_walk`) and counting another protocol's bytes (`_counting`). The
bytes not framed yet, and when and where each came, are its `FrameBuffer`'s; the large body frame in
progress is a `BodyFrame`. What it finds goes to its `FrameSink` (amqpcap.connection.stream's
AmqpConnection), which also answers what it asks: the codec, where frames may start, the options.
Every byte of the stream ends up in a frame or in an issue's `bytes_skipped`.
"""

from __future__ import annotations

import heapq
import struct
from collections import deque
from enum import IntEnum

from amqpcap.capture.tcp import StreamSink
from amqpcap.protocol.codec import FRAME_HEADER_SIZE, Codec
from amqpcap.protocol.errors import DecodeError, TruncatedFrame
from amqpcap.protocol.frame_start import FRAME_START_BYTES
from amqpcap.protocol.frames import PROTOCOL_HEADER_SIZE, parse_protocol_header

STREAM_BODY_MIN = 64 * 1024


class ReaderState(IntEnum):
    """A FrameReader's states: before the protocol header, framing, resynchronising, inside a large
    body frame streamed as it arrives, skipping the rest of a frame a gap interrupted; and for what is
    not AMQP 0-9-1: walking AMQP 1.0's frames (counted by their own header, not decoded), counting
    the bytes of another protocol (`opaque`: not framed at all). (The compiled reader holds them as C
    ints: the module's names below.)"""

    START, FRAMES, RESYNC, BODY, SKIP, WALK, OPAQUE = range(7)


START, FRAMES, RESYNC, BODY, SKIP, WALK, OPAQUE = map(int, ReaderState)
# By name, as carried states and tests name them.
READER_STATES = {"start": START, "frames": FRAMES, "resync": RESYNC, "body": BODY, "skip": SKIP, "walk": WALK,
                 "opaque": OPAQUE}
NOT_DECODED = "not-decoded"  # the issue kind of bytes walked or counted, not decoded
# AMQP 1.0's frame header (OASIS AMQP 1.0, 2.3.1): size (the whole frame's), data offset in
# 4-byte words (at least 2: the header), type (0 AMQP, 1 SASL), then two type-specific octets
_AMQP_1_0_FRAME = struct.Struct(">IBB").unpack_from
AMQP_1_0_HEADER = 8


class FrameBuffer:
    """The bytes of one direction not framed yet, and when and where every byte came: `buf` holds
    the stream from offset `base`; `end` is the offset after the last byte received; `chunks` has,
    per delivery still needed, (its end offset, ts_ns, capture index, pcap record number)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.base = 0
        self.end = 0
        self.chunks: deque[tuple[int, int, int, int]] = deque()

    def arrived(self, size: int, ts_ns: int, capture: int, record: int) -> None:
        """`size` bytes came (their bytes are appended, or framed in place, by the reader)."""
        self.end += size
        self.chunks.append((self.end, ts_ns, capture, record))

    def missing(self, offset: int, size: int, ts_ns: int) -> None:
        """Bytes from `offset` not captured: their time is the gap's, their place none."""
        self.chunks.append((offset + size, ts_ns, -1, 0))

    def consume(self, used: int) -> None:
        """The first `used` bytes were framed (or counted): they, and their deliveries, go."""
        if used:
            del self.buf[:used]
            self.base += used
        self.forget_chunks()

    def drop(self, offset: int) -> None:
        """Nothing held any more: the stream goes on at `offset`."""
        self.buf = bytearray()
        self.base = offset

    def forget_chunks(self) -> None:
        chunks = self.chunks
        while len(chunks) > 1 and chunks[0][0] <= self.base:
            chunks.popleft()

    def first_byte(self, offset: int) -> tuple[int, int, int]:
        """(ts_ns, capture, record) of the byte at stream `offset`."""
        first, _, capture, record, _ = self.timestamps(offset, offset + 1)
        return first, capture, record

    def timestamps(self, start: int, end: int) -> tuple[int, int, int, int, int]:
        """Of a stream range: (ts of its first byte, ts of its last byte, capture index, pcap record
        of the first byte, pcap record of the last byte: 0 when in another file than the first)."""
        chunk_end, ts_ns, capture, record = self.chunks[0] if self.chunks else (0, 0, -1, 0)
        if start < chunk_end and end <= chunk_end:  # the usual case: one segment holds it all
            return ts_ns, ts_ns, capture, record, record
        first = last = None
        for chunk_end, ts_ns, capture, record in self.chunks:
            if first is None and chunk_end > start:
                first = (ts_ns, capture, record)
            if chunk_end >= end:
                last = (ts_ns, capture, record)
                break
        if first is None:
            first = self.chunks[-1][1:] if self.chunks else (0, -1, 0)
        if last is None:
            last = first
        return first[0], last[0], first[1], first[2], last[2] if last[1] == first[1] else 0

    def earliest(self, low: int) -> int:
        """The time of the first byte held, if before `low`."""
        if self.buf and self.chunks:
            first = self.timestamps(self.base, self.base + 1)[0]
            if first < low:
                return first
        return low

    def saved(self, name) -> dict:
        """As plain data (`name`: capture index -> file name), in the reader's saved state."""
        return {"buf": bytes(self.buf), "base": self.base, "end": self.end,
                "chunks": [(end, ts, name(c), r) for end, ts, c, r in self.chunks]}

    def restore(self, state: dict, index) -> None:
        self.buf = bytearray(state["buf"])
        self.base, self.end = state["base"], state["end"]
        self.chunks = deque((end, ts, index(c), r) for end, ts, c, r in state["chunks"])


class BodyFrame:
    """A large body frame streamed as it arrives (FrameReader's BODY state): where it starts, its
    channel and payload size, what is left of it (payload and frame-end octet), whether every byte
    came and how many were lost, when and where its first byte came, and where its bytes start in
    its message's kept bytes (AmqpConnection.body_mark)."""

    __slots__ = ("start", "channel", "size", "remaining", "intact", "lost", "first_ts", "capture", "record", "mark")

    def __init__(self, start: int, channel: int, size: int, first_ts: int, capture: int, record: int, mark) -> None:
        self.start = start
        self.channel = channel
        self.size = size
        self.remaining = size + 1
        self.intact = True
        self.lost = 0
        self.first_ts = first_ts
        self.capture = capture
        self.record = record
        self.mark = mark

    def received(self) -> int:
        """Its bytes that came, header and frame-end octet included."""
        return self.size + 8 - self.remaining - self.lost

    def saved(self, name) -> dict:
        return {"start": self.start, "channel": self.channel, "size": self.size, "remaining": self.remaining,
                "intact": self.intact, "lost": self.lost, "first_ts": self.first_ts, "capture": name(self.capture),
                "record": self.record, "mark": self.mark}

    @staticmethod
    def restored(state: dict, index) -> "BodyFrame":
        body = BodyFrame(state["start"], state["channel"], state["size"], state["first_ts"], index(state["capture"]),
                         state["record"], state["mark"])
        body.remaining, body.intact, body.lost = state["remaining"], state["intact"], state["lost"]
        return body


class FrameSink(StreamSink):
    """What a FrameReader tells its connection, and asks of it (amqpcap.connection.stream's
    AmqpConnection is the one): a base class, not a protocol, so the compiled reader calls its
    methods directly. `codec`, `frame_start` and `settings` (StreamOptions) are the connection's."""

    def syn_seen(self, direction: int) -> bool:
        raise NotImplementedError

    def protocol_header(self, reader: FrameReader, header, offset: int) -> int:
        """A protocol header at stream `offset`: the reader's next state."""
        raise NotImplementedError

    def no_protocol_header(self, reader: FrameReader, buf, pos: int) -> int:
        """The stream starts with something else (its SYN was seen): the reader's next state."""
        raise NotImplementedError

    def mid_stream_start(self, reader: FrameReader, buf, pos: int) -> int:
        """The capture began inside the connection: the reader's next state."""
        raise NotImplementedError

    def frame(self, reader: FrameReader, frame, start: int, end: int) -> None:
        raise NotImplementedError

    def body_mark(self, reader: FrameReader, channel: int):
        """Where a large body frame's bytes start in its message's kept bytes (BodyFrame.mark)."""
        raise NotImplementedError

    def body_bytes(self, reader: FrameReader, channel: int, data) -> None:
        raise NotImplementedError

    def streamed_body(self, reader: FrameReader, body: BodyFrame, end: int) -> None:
        raise NotImplementedError

    def body_lost(self, reader: FrameReader, body: BodyFrame) -> None:
        raise NotImplementedError

    def issue(self, reader: FrameReader, kind: str, detail: str, skipped: int, start: int, end: int,
              channel, ts=None) -> None:
        raise NotImplementedError


class FrameReader:
    """One direction's framing: a state machine over the bytes its FrameBuffer holds. Each state
    has its method (`_run` dispatches), which consumes what it can and says when it needs more."""

    def __init__(self, connection: FrameSink, direction: int) -> None:
        self.connection = connection
        self.direction = direction
        self.buffer = FrameBuffer()
        self.state = START
        self.needs_more = False  # a state's method stopped for want of bytes (_run's loop ends)
        self.mid_stream = False
        self.skipped = 0  # bytes skipped in the current resynchronisation or skip
        self.skip_first = (0, -1, 0)  # (ts_ns, capture, record) of its first byte, whose chunk may be forgotten
        self.skip_last = (0, -1, 0)  # the same of the last byte a resynchronisation has dropped so far
        self.skip_remaining = 0
        self.skip_detail = ""
        # Candidates not yet decidable (stream offsets): `resync_live`; `resync_due`, a heap of (the
        # stream offset their bytes must reach to be decided, offset); `resync_order`, the offsets in
        # the order found (those no longer live are skipped there lazily). Made when a resync
        # starts (None otherwise): most streams never lose framing, and a connection's objects are
        # freed long after their last use, once its close grace has passed
        self.resync_live: set[int] | None = None
        self.resync_due: list[tuple[int, int]] | None = None
        self.resync_order: deque[int] | None = None
        self.resync_scanned = 0  # stream offset up to which candidates have been judged
        self.body: BodyFrame | None = None  # streaming body frame in progress
        # walking AMQP 1.0: the frames of the run not yet reported (all, SASL ones), and in all
        self.walked_frames = 0
        self.walked_sasl = 0
        self.undecoded_frames = 0
        self.opaque_kind = NOT_DECODED  # what counting another protocol's bytes reports them as
        self.frames = 0
        self.decoded_bytes = 0
        self.skipped_bytes = 0

    # -- input --------------------------------------------------------------------------------

    def data(self, offset: int, data: bytes, ts_ns: int, capture: int, record: int) -> None:
        if offset != self.buffer.end:  # the TCP layer delivers in order; never crash if it did not
            if offset > self.buffer.end:
                self.gap(self.buffer.end, offset - self.buffer.end, ts_ns)
            else:
                data = data[self.buffer.end - offset:]
                offset = self.buffer.end
                if not data:
                    return
        if self.buffer.end == 0 and self.state == START and offset == 0:
            self.mid_stream = not self.connection.syn_seen(self.direction)
        buffer = self.buffer
        buffer.arrived(len(data), ts_ns, capture, record)
        if buffer.buf:
            buffer.buf += data
            self._process(final=False)
            return
        # Nothing buffered (the usual case): work on the segment itself and keep only a partial
        # frame left at its end.
        buffer.base = offset
        buffer.forget_chunks()  # before decoding: the segment's frames then find their time at once
        used = self._run(data, final=False)
        if used < len(data):
            buffer.buf = bytearray(data[used:])
        buffer.base = offset + used
        buffer.forget_chunks()

    def gap(self, offset: int, size: int, ts_ns: int) -> None:
        self.buffer.missing(offset, size, ts_ns)
        if self.skipped and self.state != FRAMES and self.state != BODY:
            # What a resynchronisation (or a skip, a walk) dropped so far lies before the gap: its own
            # issue, so that every issue's range holds the bytes it counts (the gap's comes after)
            self._report_skipped(self.buffer.base, self.skip_last if self.state == RESYNC else None)
        if self.state == WALK or self.state == OPAQUE:
            self._walk_gap(offset, size)
            return
        if self.state == BODY and size < self.body.remaining:
            body = self.body
            body.remaining -= size
            body.intact = False
            body.lost += size
            self.buffer.end += size
            self._issue("gap", f"{size} bytes not captured inside a {body.size}-byte body "
                        "frame; framing kept", size, offset, offset + size, body.channel)
            return
        buffered = len(self.buffer.buf)
        frame_size = self._known_frame_size()
        self.buffer.end += size
        if frame_size is not None and self.buffer.base + frame_size > offset + size:
            # The interrupted frame's extent is known: skip exactly to its end, no resync needed.
            self.state = SKIP
            self.skip_remaining = self.buffer.base + frame_size - (offset + size)
            self.skip_first = self.buffer.first_byte(self.buffer.base)
            self.skipped = buffered + size
            self.skip_detail = (f"{size} bytes not captured inside a {frame_size}-byte frame; "
                                "the frame is lost, framing kept")
            self.buffer.drop(offset + size)
            if self.skip_remaining == 0:
                self._end_skip()
            return
        lost_from = self.buffer.base
        self.skip_detail = ""
        if self.state == BODY:  # the gap runs past the body's end: the frame is lost
            self.connection.body_lost(self, self.body)
            buffered += self.body.received()
            lost_from = self.body.start
            self.body = None
        self._issue("gap", f"{size} bytes not captured" +
                    (f"; {buffered} received bytes of an incomplete frame dropped" if buffered else ""),
                    size + buffered, lost_from, offset + size, None)
        self.buffer.drop(offset + size)
        self.state = RESYNC

    def finish(self) -> None:
        """The stream ended: decode what still can be and account for the rest."""
        self._process(final=True)
        left = len(self.buffer.buf)
        if self.state == BODY:
            self.connection.body_lost(self, self.body)
            body = self.body
            self._issue("truncated", f"stream ended inside a {body.size}-byte body frame",
                        body.received() + left, body.start, self.buffer.end, body.channel)
            self.body = None
        elif self.state in (WALK, OPAQUE) and (self.skipped or left):
            if not self.skipped:
                self.skip_first = self.buffer.first_byte(self.buffer.base)
            self.skipped += left
            self._report_skipped(self.buffer.end, None)
        elif self.state in (RESYNC, SKIP) and (self.skipped or left):
            if not self.skipped:
                self.skip_first = self.buffer.first_byte(self.buffer.base)
            self._issue("resync" if self.state == RESYNC else "gap",
                        self.skip_detail or "stream ended before frames could be found again",
                        self.skipped + left, self.buffer.base - self.skipped, self.buffer.end, None, self.skip_first)
        elif left:
            self._issue("truncated", f"stream ended inside a frame ({left} bytes)", left, self.buffer.base,
                        self.buffer.end, None)
        self.buffer.buf = bytearray()
        self.skipped = 0

    # -- framing ------------------------------------------------------------------------------

    def _process(self, final: bool) -> None:
        self.buffer.consume(self._run(self.buffer.buf, final))



    def _run(self, buf, final: bool) -> int:
        """Decode from the start of `buf` (whose first byte is at stream offset buffer.base) as far
        as its bytes allow; return how many bytes were consumed. `buf` is only read. Each state's
        method goes as far as it can and returns where it stopped; it sets `needs_more` when the
        bytes that follow must come first."""
        pos, size = 0, len(buf)
        self.needs_more = False
        while pos < size and not self.needs_more:
            state = self.state
            if state == FRAMES:
                pos = self._framing(buf, pos)
            elif state == BODY:
                pos = self._feed_body(buf, pos)
            elif state == WALK:
                walked = self._walk(buf, pos, final)
                self.needs_more = walked == pos and self.state == WALK  # a frame or protocol header not whole yet
                pos = walked
            elif state == OPAQUE:
                pos = self._counting(buf, pos)
            elif state == START:
                pos = self._starting(buf, pos, final)
            elif state == RESYNC:
                pos = self._resyncing(buf, pos, final)
            else:
                pos = self._skipping(buf, pos)
        return pos

    def _framing(self, buf, pos: int) -> int:
        """FRAMES: frame after frame through the codec, each handed to the connection."""
        connection = self.connection
        codec, max_frame, size = connection.codec, connection.settings.max_frame, len(buf)
        base = self.buffer.base
        while pos < size and self.state == FRAMES:
            try:
                frame, next_pos = codec.decode_frame(buf, pos, max_frame)
            except TruncatedFrame:
                if self._start_body(buf, pos):
                    return size
                self.needs_more = True
                return pos
            except DecodeError as error:
                if error.frame_end is None:  # framing lost: bad frame-end, unknown type, oversize
                    self._issue("framing", f"{error.kind}: {error.detail}", 0, base + pos, base + pos, None)
                    self.state = RESYNC
                    return pos
                self._emit_error(error, pos)
                pos = error.frame_end
                continue
            self.frames += 1
            self.decoded_bytes += next_pos - pos
            connection.frame(self, frame, base + pos, base + next_pos)
            pos = next_pos
        return pos

    def _starting(self, buf, pos: int, final: bool) -> int:
        """START: the protocol header, or what the connection makes of bytes without one."""
        available = len(buf) - pos
        if buf[pos:pos + 4] == b"AMQP"[:min(4, available)] and available < PROTOCOL_HEADER_SIZE and not final:
            self.needs_more = True
            return pos
        if buf[pos:pos + 4] == b"AMQP" and available >= PROTOCOL_HEADER_SIZE:
            header = parse_protocol_header(buf[pos:pos + PROTOCOL_HEADER_SIZE])
            self.state = self.connection.protocol_header(self, header, self.buffer.base + pos)
            return pos + PROTOCOL_HEADER_SIZE
        if self.mid_stream:
            # a capture begun inside a connection: AMQP 1.0 frames from a frame's start are
            # told by their header (no 0-9-1 frame starts with octet 0); else resynchronise
            self.state = self.connection.mid_stream_start(self, buf, pos)
        else:
            self.state = self.connection.no_protocol_header(self, buf, pos)
        self.needs_more = self.state == START  # (never: the connection always decides)
        return pos

    def _resyncing(self, buf, pos: int, final: bool) -> int:
        """RESYNC: bytes dropped until a frame checks out and so does the next (_find_sync)."""
        base = self.buffer.base
        found, keep = self._find_sync(buf, pos, final)
        if not self.skipped and (keep if found is None else found) > pos:
            self.skip_first = self.buffer.first_byte(base + pos)
        if found is None:  # need more bytes; drop what cannot start a frame
            if keep > pos:  # (its time, before its chunk can be forgotten)
                self.skip_last = self.buffer.first_byte(base + keep - 1)
            self.skipped += keep - pos
            self.needs_more = True
            return keep
        self.skipped += found - pos
        if self.skipped:
            start = base + found - self.skipped
            self._issue("resync", self._skip_text(start), self.skipped, start, base + found, None, self.skip_first,
                        None if found > pos else self.skip_last)  # (the last one dropped already)
        self.skipped = 0
        self.skip_detail = ""  # (said why a carried resynchronisation dropped bytes, if it did)
        self.state = FRAMES
        return found

    def _skipping(self, buf, pos: int) -> int:
        """SKIP: the rest of a frame a gap interrupted, whose size its header told."""
        step = min(self.skip_remaining, len(buf) - pos)
        self.skip_remaining -= step
        self.skipped += step
        pos += step
        if self.skip_remaining == 0:
            self._end_skip(pos)
        return pos

    def _counting(self, buf, pos: int) -> int:
        """OPAQUE: another protocol's bytes (or AMQP 1.0's after its framing was lost), counted."""
        if not self.skipped:
            self.skip_first = self.buffer.first_byte(self.buffer.base + pos)
        self.skipped += len(buf) - pos
        return len(buf)

    def _report_skipped(self, end: int, last_byte) -> None:
        """The bytes dropped (or walked) so far, up to stream offset `end`, as their issue."""
        state = self.state
        kind = "resync" if state == RESYNC else "gap" if state == SKIP else NOT_DECODED if state == WALK \
            else self.opaque_kind
        start = end - self.skipped
        self._issue(kind, self._skip_text(start), self.skipped, start, end, None, self.skip_first, last_byte)
        self.skipped = 0
        self.walked_frames = self.walked_sasl = 0

    def _skip_text(self, start: int) -> str:
        """Why the bytes a resynchronisation dropped from stream offset `start` were skipped."""
        if self.state == WALK:
            amqp = self.walked_frames - self.walked_sasl
            kinds = [f"{n} {name}" for n, name in ((self.walked_sasl, "SASL"), (amqp, "AMQP")) if n]
            return (f"AMQP 1.0: {self.walked_frames} frame{'s' if self.walked_frames != 1 else ''}"
                    + (f" ({', '.join(kinds)})" if kinds else "") + " walked by their headers, not decoded"
                    + (f"; {self.skip_detail}" if self.skip_detail else ""))
        if self.skip_detail:
            return self.skip_detail
        if self.state == RESYNC:
            if start == 0 and self.mid_stream:
                return "capture started mid-stream: bytes before the first whole frame"
            return "bytes skipped until frames were found again"
        return "bytes skipped"

    def _end_skip(self, pos: int = 0) -> None:
        self._issue("gap", self.skip_detail, self.skipped, self.buffer.base + pos - self.skipped,
                    self.buffer.base + pos, None, self.skip_first)
        self.skipped = 0
        self.skip_detail = ""
        self.state = FRAMES

    def _known_frame_size(self) -> int | None:
        """Wire size of the partial frame at the buffer's start, if its header is there."""
        header = self.connection.codec.frame_header(self.buffer.buf, 0) if self.state == FRAMES else None
        if header is None:
            return None
        frame_type, _, size = header
        if frame_type not in self.connection.codec.frame_types or size > self.connection.settings.max_frame:
            return None
        return size + 8

    def _find_sync(self, buf: bytearray, pos: int, final: bool) -> tuple[int | None, int]:
        """(sync offset, _) where a frame checks out and so does the one after it, or (None, keep):
        no sync yet, and bytes before `keep` can never start one.

        A candidate whose frame has not fully arrived is never taken over a later one that checks
        out (inside a body, a false candidate claiming a large frame is far likelier than two
        consecutive good frames). A rejected candidate stays rejected, and an undecided one is judged
        again only once the bytes it waits for have come: each call judges those and scans the bytes
        that arrived since the last call. (Judging every waiting candidate again on every segment was
        quadratic: bytes dense in candidates claiming large frames, such as an array of small
        integers inside a body, held thousands waiting.)"""
        base = self.buffer.base
        available = base + len(buf)
        if self.resync_live is None:
            self.resync_live, self.resync_due, self.resync_order = set(), [], deque()
        due, live = self.resync_due, self.resync_live
        ready = []
        while due and (final or due[0][0] <= available):
            absolute = heapq.heappop(due)[1]
            if absolute in live and absolute - base >= pos:
                ready.append(absolute)
        ready.sort()
        found = None
        for absolute in ready:  # in stream order: the first that checks out is taken
            i = absolute - base
            verdict = self._judge(buf, i, final)
            if verdict:
                found = i
                break
            if verdict is None:
                heapq.heappush(due, (self._needed(buf, i), absolute))
            else:
                live.discard(absolute)
        if found is None:
            starts = self.connection.frame_start
            i = starts.find(buf, max(pos, self.resync_scanned - base))
            while i >= 0:
                verdict = self._judge(buf, i, final)
                if verdict:
                    found = i
                    break
                if verdict is None and base + i not in live:  # (the last bytes are scanned twice)
                    live.add(base + i)
                    heapq.heappush(due, (self._needed(buf, i), base + i))
                    self.resync_order.append(base + i)
                i = starts.find(buf, i + 1)
        if found is not None or final:
            self.resync_live, self.resync_due, self.resync_order, self.resync_scanned = None, None, None, 0
            return (found if found is not None else len(buf)), len(buf)
        # a candidate in the last bytes could not match yet: scan them again with what follows
        self.resync_scanned = base + max(pos, len(buf) - FRAME_START_BYTES + 1)
        order = self.resync_order
        while order and (order[0] not in live or order[0] - base < pos):
            live.discard(order.popleft())
        keep = order[0] - base if order else max(pos, len(buf) - FRAME_HEADER_SIZE + 1)
        keep = max(keep, len(buf) - 2 * self.connection.settings.resync_max_frame)  # bounded memory
        while order and order[0] - base < keep:
            live.discard(order.popleft())
        return None, keep

    def _needed(self, buf, i: int) -> int:
        """The stream offset the bytes must reach before an undecided candidate at i can be judged:
        its header's end, its frame's end octet, or the next frame's header (as _judge reads them)."""
        header = self.connection.codec.frame_header(buf, i)
        if header is None:
            return self.buffer.base + i + FRAME_HEADER_SIZE
        end = i + FRAME_HEADER_SIZE + header[2]
        if end >= len(buf):
            return self.buffer.base + end + 1
        return self.buffer.base + end + 1 + FRAME_HEADER_SIZE

    def _judge(self, buf: bytearray, i: int, final: bool) -> bool | None:
        """Does a frame start at i? True, False, or None while the bytes to tell are missing."""
        codec = self.connection.codec
        limit = self.connection.settings.resync_max_frame
        verdict = plausible(codec, buf, i, limit)
        if verdict is False or verdict is None:
            return verdict
        following = plausible(codec, buf, verdict, limit)
        if following is False:
            return False
        if following is None and verdict + FRAME_HEADER_SIZE > len(buf) and not final:
            return None  # the next frame's header has not arrived yet
        return True

    # -- AMQP 1.0 and other protocols: counted, not decoded -------------------------------------

    def _walk(self, buf, pos: int, final: bool) -> int:
        """AMQP 1.0's frames from `pos`, each skipped by its own header's size and counted (the
        run's bytes in `skipped`, reported as one issue when a protocol header or a gap ends the
        run, or the stream ends); a protocol header between them (SASL's outcome, then AMQP's) is
        a record as any other. Returns where the bytes ran out (== `pos`: more are needed)."""
        size = len(buf)
        while pos < size:
            if self.skip_remaining:  # inside a frame
                if not self.skipped:  # (a run that begins inside a frame: after a gap)
                    self.skip_first = self.buffer.first_byte(self.buffer.base + pos)
                step = min(self.skip_remaining, size - pos)
                self.skip_remaining -= step
                self.skipped += step
                pos += step
                continue
            available = size - pos
            if buf[pos:pos + 4] == b"AMQP"[:min(4, available)]:  # a protocol header (or its start)
                if available < PROTOCOL_HEADER_SIZE and not final:
                    break
                if available >= PROTOCOL_HEADER_SIZE:
                    if self.skipped:
                        self._report_skipped(self.buffer.base + pos, None)
                    header = parse_protocol_header(buf[pos:pos + PROTOCOL_HEADER_SIZE])
                    self.state = self.connection.protocol_header(self, header, self.buffer.base + pos)
                    pos += PROTOCOL_HEADER_SIZE
                    if self.state != WALK:
                        break
                    continue
            if available < AMQP_1_0_HEADER:
                if final:  # the stream ends inside a frame header: counted with the run
                    if not self.skipped:
                        self.skip_first = self.buffer.first_byte(self.buffer.base + pos)
                    self.skipped += available
                    self.skip_detail = "the stream ended inside a frame header"
                    pos = size
                break
            frame_size, offset_words, frame_type = _AMQP_1_0_FRAME(buf, pos)
            if frame_size < 8 or offset_words < 2 or offset_words * 4 > frame_size or frame_type > 1 \
                    or frame_size > self.connection.settings.max_frame:
                # not a 1.0 frame: what follows cannot be walked; counted to the end
                if self.skipped:
                    self._report_skipped(self.buffer.base + pos, None)
                self.state = OPAQUE
                self.opaque_kind = NOT_DECODED
                self.skip_detail = (f"AMQP 1.0 framing lost at stream offset {self.buffer.base + pos} (a frame header "
                                    f"claiming {frame_size} bytes, data offset {offset_words}, type {frame_type}): "
                                    "the rest of the direction counted, not decoded")
                return pos
            if not self.skipped:
                self.skip_first = self.buffer.first_byte(self.buffer.base + pos)
            self.walked_frames += 1
            self.undecoded_frames += 1
            if frame_type == 1:
                self.walked_sasl += 1
            self.skip_remaining = frame_size
        return pos

    def _walk_gap(self, offset: int, size: int) -> None:
        """Bytes not captured while walking or counting: a `gap` issue of their own. Walking goes on
        when the gap lies inside the frame being walked (its header said how long it is); else the
        next frame's start is unknown and the rest of the direction is counted."""
        buffered = len(self.buffer.buf)
        inside = self.state == WALK and not buffered and size < self.skip_remaining
        self._issue("gap", f"{size} bytes not captured" + (
            f"; {buffered} received bytes of an incomplete frame header dropped" if buffered else ""),
            size + buffered, self.buffer.base, offset + size, None)
        self.buffer.end += size
        self.buffer.buf = bytearray()
        self.buffer.base = offset + size
        if inside:
            self.skip_remaining -= size
        elif self.state == WALK:
            self.state = OPAQUE
            self.opaque_kind = NOT_DECODED
            self.skip_detail = "AMQP 1.0 framing lost after bytes not captured: the rest counted, not decoded"

    # -- large bodies -------------------------------------------------------------------------

    def _start_body(self, buf: bytearray, pos: int) -> bool:
        header = self.connection.codec.frame_header(buf, pos)
        if header is None:
            return False
        frame_type, channel, size = header
        if self.connection.codec.frame_types.get(frame_type) != "body" or size < STREAM_BODY_MIN:
            return False
        start = self.buffer.base + pos
        first_ts, _, capture, record, _ = self.buffer.timestamps(start, start + 1)  # its chunk is forgotten meanwhile
        self.body = BodyFrame(start, channel, size, first_ts, capture, record, self.connection.body_mark(self, channel))
        self.state = BODY
        self._feed_body(buf, pos + FRAME_HEADER_SIZE)
        return True

    def _feed_body(self, buf: bytearray, pos: int) -> int:
        body = self.body
        payload_left = body.remaining - 1
        take = min(payload_left, len(buf) - pos)
        if take:
            with memoryview(buf) as view:  # no copy; released before the buffer can be resized
                self.connection.body_bytes(self, body.channel, view[pos:pos + take])
            body.remaining -= take
            pos += take
        if body.remaining == 1 and pos < len(buf):
            end_octet = buf[pos]
            pos += 1
            body.remaining = 0
            self.body = None
            self.state = FRAMES
            frame_end = self.connection.codec.frame_end
            if end_octet != frame_end:
                self.connection.body_lost(self, body)
                self._issue("framing", f"bad-frame-end: octet after a {body.size}-byte body payload "
                            f"is {end_octet:#04x}, not {frame_end:#04x}", body.size + 8 - body.lost,
                            body.start, self.buffer.base + pos, body.channel)
                self.state = RESYNC
            else:
                self.connection.streamed_body(self, body, self.buffer.base + pos)
        return pos

    # -- output -------------------------------------------------------------------------------

    def _emit_error(self, error: DecodeError, pos: int) -> None:
        size = error.frame_end - pos
        self._issue(error.kind, error.detail, size, self.buffer.base + pos, self.buffer.base + error.frame_end,
                    error.channel)

    def _issue(self, kind: str, detail: str, skipped: int, start: int, end: int, channel,
               first: tuple[int, int, int] | None = None, last_byte: tuple[int, int, int] | None = None) -> None:
        """`first`: (ts_ns, capture, record) of the first byte, for ranges whose start has been forgotten;
        `last_byte`: the same of the last byte, for ranges whose end has been forgotten too."""
        self.skipped_bytes += skipped
        end = max(start, end)
        ts = None
        if first is not None:
            if last_byte is not None:
                ts = (first[0], last_byte[0], first[1], first[2], last_byte[2] if last_byte[1] == first[1] else 0)
            else:
                last = self.buffer.timestamps(end - 1, end) if end > start else (first[0], first[0], first[1], first[2],
                                                                          first[2])
                ts = (first[0], last[1], first[1], first[2], last[4] if last[2] == first[1] else 0)
        self.connection.issue(self, kind, detail, skipped, start, end, channel, ts)

    # -- carried to the next run (amqpcap.onepass.state frames the blob) ---------------------------

    def saved(self, name, may_send_secrets: bool) -> dict:
        """This direction's framing as plain data for the next run (`name`: capture index -> file
        name). Bytes that may hold credentials are never in it (`_withheld`)."""
        body = self.body.saved(name) if self.body is not None else None
        saved = {**self.buffer.saved(name), "state": int(self.state),
                 "mid_stream": self.mid_stream, "skipped": self.skipped,
                 "skip_first": (self.skip_first[0], name(self.skip_first[1]), self.skip_first[2]),
                 "skip_last": (self.skip_last[0], name(self.skip_last[1]), self.skip_last[2]),
                 "skip_remaining": self.skip_remaining,
                 "skip_detail": self.skip_detail, "resync_waiting": sorted(self.resync_live or ()),
                 "resync_scanned": self.resync_scanned, "body": body, "frames": self.frames,
                 "decoded_bytes": self.decoded_bytes, "skipped_bytes": self.skipped_bytes,
                 "walked_frames": self.walked_frames, "walked_sasl": self.walked_sasl,
                 "undecoded_frames": self.undecoded_frames, "opaque_kind": self.opaque_kind}
        if self.buffer.buf and (self.state == FRAMES and self.connection.codec.may_hold_secret(self.buffer.buf)
                         or self.state == RESYNC and may_send_secrets):
            saved.update(self._withheld(name))
        return saved

    def _withheld(self, name) -> dict:
        """What is saved instead of a buffer that may hold credentials: none of its bytes, and the
        next run skips them with an issue saying why. A frame cut by the run's end whose size is
        known (the codec says which frames may carry credentials) is skipped to its end, framing
        kept; bytes a resynchronisation was still judging (not framed yet: any frame's) are dropped,
        and the resynchronisation goes on from the next run's first byte."""
        held = len(self.buffer.buf)
        size = self._known_frame_size() if self.state == FRAMES else None
        first = self.buffer.first_byte(self.buffer.base) if self.state == FRAMES or not self.skipped else self.skip_first
        withheld = {"buf": b"", "base": self.buffer.base + held, "skip_first": (first[0], name(first[1]), first[2])}
        if size is not None:
            withheld.update(state=SKIP, skipped=held, skip_remaining=size - held,
                            skip_detail=f"a {size}-byte frame that may carry credentials was cut by the end of "
                                        "the previous run; its bytes were not saved: the frame is lost, framing kept")
            return withheld
        last = self.buffer.first_byte(self.buffer.base + held - 1)
        withheld.update(state=RESYNC, skipped=self.skipped + held, skip_last=(last[0], name(last[1]), last[2]),
                        resync_waiting=[], resync_scanned=self.buffer.base + held,
                        skip_detail="bytes not yet framed when the previous run ended were not saved (they may "
                                    "carry credentials): skipped until frames were found again")
        return withheld

    def restore(self, state: dict, index) -> None:
        """This direction's framing as `saved` left it (`index`: file name -> capture index)."""
        self.buffer.restore(state, index)
        self.state, self.mid_stream = state["state"], state["mid_stream"]
        self.skipped = state["skipped"]
        self.skip_first = (state["skip_first"][0], index(state["skip_first"][1]), state["skip_first"][2])
        last = state.get("skip_last", state["skip_first"])  # (saved before it was kept: its first byte)
        self.skip_last = (last[0], index(last[1]), last[2])
        self.skip_remaining, self.skip_detail = state["skip_remaining"], state["skip_detail"]
        waiting = sorted(state["resync_waiting"])  # judged again at once: due from offset 0
        if waiting:
            self.resync_live, self.resync_due = set(waiting), [(0, a) for a in waiting]
            self.resync_order = deque(waiting)
        self.resync_scanned = state["resync_scanned"]
        self.body = BodyFrame.restored(state["body"], index) if state["body"] else None
        self.frames, self.decoded_bytes = state["frames"], state["decoded_bytes"]
        self.skipped_bytes = state["skipped_bytes"]
        # (states saved before AMQP 1.0 was walked have none of these)
        self.walked_frames, self.walked_sasl = state.get("walked_frames", 0), state.get("walked_sasl", 0)
        self.undecoded_frames = state.get("undecoded_frames", 0)
        self.opaque_kind = state.get("opaque_kind", NOT_DECODED)

    def earliest_pending(self, low: int) -> int:
        """The earliest time of what this direction holds for records still to come, if before
        `low`: a partial frame's first byte, a large body frame in progress, bytes skipped (or
        counted) not yet told."""
        low = self.buffer.earliest(low)
        if self.state == BODY and self.body is not None:
            if self.body.first_ts < low:
                low = self.body.first_ts
        elif self.skipped and self.skip_first[0] < low:
            low = self.skip_first[0]
        return low


def starts_with_1_0_frames(buf, pos: int, limit: int) -> bool:
    """Whether the bytes from `pos` are AMQP 1.0 frames: two headers that chain (sizes from 8 up
    to `limit`, data offset 2, type AMQP or SASL), or one frame ending exactly where the bytes do."""
    end = len(buf)
    for count in range(2):
        if end - pos < AMQP_1_0_HEADER:
            return False
        frame_size, offset_words, frame_type = _AMQP_1_0_FRAME(buf, pos)
        if frame_size < 8 or frame_size > limit or offset_words != 2 or frame_type > 1:
            return False
        pos += frame_size
        if pos == end:
            return True
    return True


def plausible(codec: Codec, buf, i: int, limit: int):
    """False if no frame can start at i; None if more bytes are needed to tell; else its end."""
    header = codec.frame_header(buf, i)
    if header is None:
        return None
    frame_type, channel, size = header
    if frame_type not in codec.frame_types or size > limit:
        return False
    kind = codec.frame_types[frame_type]
    if kind == "heartbeat" and (size or channel):
        return False
    end = i + FRAME_HEADER_SIZE + size
    if end >= len(buf):
        return None
    return end + 1 if buf[end] == codec.frame_end else False
