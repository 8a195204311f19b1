"""AMQP over one TCP connection: bytes of both directions in, one record per frame out.

`AmqpConnection` is the `StreamSink` the TCP layer feeds. It decides whether the connection is
AMQP at all and which side is the client (the side that sent the protocol header; else the side
that sent the SYN; else the side not on a configured AMQP port; else the direction of the first
method that travels only one way), picks the spec from the client's protocol header, and runs one
`FrameReader` per direction.

A `FrameReader` turns its direction's bytes into frames with the codec, resynchronising after a
gap or a mid-stream start on the first offset where a frame header, its size and its frame-end
agree and the next frame agrees too. Body frames larger than `STREAM_BODY_MIN` are consumed as
their bytes arrive (hashed, never buffered whole), so a gap inside one costs only the bytes lost.
Every byte of the stream ends up in a frame or in an issue's `bytes_skipped`.

Records are amqp_decode.record.Record objects, in the JSON contract of `amqpcap decode --jsonl`
(see docs).
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import struct
from collections import deque

from amqp_decode.codec import FRAME_HEADER_SIZE, Codec
from amqp_decode.errors import DecodeError, TruncatedFrame
from amqp_decode.frame_start import FRAME_START_BYTES, frame_start_for
from amqp_decode.frames import PROTOCOL_HEADER_SIZE, parse_protocol_header, protocol_header_texts
from amqp_decode.other_protocols import name_protocol
from amqp_decode.packets import format_endpoint
from amqp_decode.record import Record, add_message, as_record, end_record, new_record
from amqp_decode.settings import Settings
from amqp_decode.spec import CLIENT_TO_SERVER, SERVER_TO_CLIENT
from amqp_decode.tcp import StreamSink

STREAM_BODY_MIN = 64 * 1024
_FRAME_HEADER = struct.Struct(">BHI").unpack_from


# A FrameReader's states: before the protocol header, framing, resynchronising, inside a large
# body frame streamed as it arrives, skipping the rest of a frame a gap interrupted; and for what is
# not AMQP 0-9-1: walking AMQP 1.0's frames (counted by their own header, not decoded), counting
# the bytes of another protocol (`opaque`: not framed at all).
START, FRAMES, RESYNC, BODY, SKIP, WALK, OPAQUE = range(7)
# The same for Python callers (amqp_decode.state): compiled, the names above are C ints, not exported.
READER_STATES = {"start": START, "frames": FRAMES, "resync": RESYNC, "body": BODY, "skip": SKIP, "walk": WALK,
                 "opaque": OPAQUE}
NOT_DECODED = "not-decoded"  # the issue kind of bytes walked or counted, not decoded
# AMQP 1.0's frame header (OASIS AMQP 1.0, 2.3.1): size (the whole frame's), data offset in
# 4-byte words (at least 2: the header), type (0 AMQP, 1 SASL), then two type-specific octets
_AMQP_1_0_FRAME = struct.Struct(">IBB").unpack_from
AMQP_1_0_HEADER = 8


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


class FrameReader:
    """One direction's framing state."""

    def __init__(self, connection: "AmqpConnection", direction: int) -> None:
        self.connection = connection
        self.direction = direction
        self.buf = bytearray()
        self.base = 0  # stream offset of buf[0]
        self.end = 0  # stream offset after the last byte received
        # per delivery: (end offset, ts_ns, capture, pcap record number): when and where each byte came
        self.chunks: deque[tuple[int, int, int, int]] = deque()
        self.state = START
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
        if offset != self.end:  # the TCP layer delivers in order; never crash if it did not
            if offset > self.end:
                self.gap(self.end, offset - self.end, ts_ns)
            else:
                data = data[self.end - offset:]
                offset = self.end
                if not data:
                    return
        if self.end == 0 and self.state == START and offset == 0:
            self.mid_stream = not self.connection.syn_seen(self.direction)
        self.end += len(data)
        self.chunks.append((self.end, ts_ns, capture, record))
        if self.buf:
            self.buf += data
            self._process(final=False)
            return
        # Nothing buffered (the usual case): work on the segment itself and keep only a partial
        # frame left at its end.
        self.base = offset
        self._forget_chunks()  # before decoding: the segment's frames then find their time at once
        used = self._run(data, final=False)
        if used < len(data):
            self.buf = bytearray(data[used:])
        self.base = offset + used
        self._forget_chunks()

    def gap(self, offset: int, size: int, ts_ns: int) -> None:
        self.chunks.append((offset + size, ts_ns, -1, 0))
        if self.skipped and self.state != FRAMES and self.state != BODY:
            # What a resynchronisation (or a skip, a walk) dropped so far lies before the gap: its own
            # issue, so that every issue's range holds the bytes it counts (the gap's comes after)
            self._report_skipped(self.base, self.skip_last if self.state == RESYNC else None)
        if self.state == WALK or self.state == OPAQUE:
            self._walk_gap(offset, size)
            return
        if self.state == BODY and size < self.body.remaining:
            body = self.body
            body.remaining -= size
            body.intact = False
            body.lost += size
            self.end += size
            self._issue("gap", f"{size} bytes not captured inside a {body.size}-byte body "
                        "frame; framing kept", size, offset, offset + size, body.channel)
            return
        buffered = len(self.buf)
        frame_size = self._known_frame_size()
        self.end += size
        if frame_size is not None and self.base + frame_size > offset + size:
            # The interrupted frame's extent is known: skip exactly to its end, no resync needed.
            self.state = SKIP
            self.skip_remaining = self.base + frame_size - (offset + size)
            self.skip_first = self._first_byte(self.base)
            self.skipped = buffered + size
            self.skip_detail = (f"{size} bytes not captured inside a {frame_size}-byte frame; "
                                "the frame is lost, framing kept")
            self.buf = bytearray()
            self.base = offset + size
            if self.skip_remaining == 0:
                self._end_skip()
            return
        lost_from = self.base
        self.skip_detail = ""
        if self.state == BODY:  # the gap runs past the body's end: the frame is lost
            self.connection.body_lost(self, self.body)
            buffered += self.body.received()
            lost_from = self.body.start
            self.body = None
        self._issue("gap", f"{size} bytes not captured" +
                    (f"; {buffered} received bytes of an incomplete frame dropped" if buffered else ""),
                    size + buffered, lost_from, offset + size, None)
        self.buf = bytearray()
        self.base = offset + size
        self.state = RESYNC

    def finish(self) -> None:
        """The stream ended: decode what still can be and account for the rest."""
        self._process(final=True)
        left = len(self.buf)
        if self.state == BODY:
            self.connection.body_lost(self, self.body)
            body = self.body
            self._issue("truncated", f"stream ended inside a {body.size}-byte body frame",
                        body.received() + left, body.start, self.end, body.channel)
            self.body = None
        elif self.state in (WALK, OPAQUE) and (self.skipped or left):
            if not self.skipped:
                self.skip_first = self._first_byte(self.base)
            self.skipped += left
            self._report_skipped(self.end, None)
        elif self.state in (RESYNC, SKIP) and (self.skipped or left):
            if not self.skipped:
                self.skip_first = self._first_byte(self.base)
            self._issue("resync" if self.state == RESYNC else "gap",
                        self.skip_detail or "stream ended before frames could be found again",
                        self.skipped + left, self.base - self.skipped, self.end, None, self.skip_first)
        elif left:
            self._issue("truncated", f"stream ended inside a frame ({left} bytes)", left, self.base,
                        self.end, None)
        self.buf = bytearray()
        self.skipped = 0

    # -- framing ------------------------------------------------------------------------------

    def _process(self, final: bool) -> None:
        pos = self._run(self.buf, final)
        if pos:
            del self.buf[:pos]
            self.base += pos
        self._forget_chunks()

    def _forget_chunks(self) -> None:
        chunks = self.chunks
        while len(chunks) > 1 and chunks[0][0] <= self.base:
            chunks.popleft()

    def _run(self, buf, final: bool) -> int:
        """Decode from the start of `buf` (whose first byte is at stream offset self.base) as far
        as its bytes allow; return how many bytes were consumed. `buf` is only read."""
        codec = self.connection.codec
        max_frame, size = self.connection.settings.max_frame, len(buf)
        pos = 0
        while pos < size:
            state = self.state
            if state == FRAMES:
                try:
                    frame, next_pos = codec.decode_frame(buf, pos, max_frame)
                except TruncatedFrame:
                    if self._start_body(buf, pos):
                        pos = len(buf)
                        continue
                    break
                except DecodeError as error:
                    if error.frame_end is None:  # framing lost: bad frame-end, unknown type, oversize
                        self._issue("framing", f"{error.kind}: {error.detail}", 0, self.base + pos,
                                    self.base + pos, None)
                        self.state = RESYNC
                        continue
                    self._emit_error(error, pos)
                    pos = error.frame_end
                    continue
                self.frames += 1
                self.decoded_bytes += next_pos - pos
                self.connection.frame(self, frame, self.base + pos, self.base + next_pos)
                pos = next_pos
            elif state == BODY:
                pos = self._feed_body(buf, pos)
            elif state == WALK:
                walked = self._walk(buf, pos, final)
                if walked == pos and self.state == WALK:
                    break  # a frame header (or protocol header) not whole yet
                pos = walked
            elif state == OPAQUE:
                if not self.skipped:
                    self.skip_first = self._first_byte(self.base + pos)
                self.skipped += size - pos
                pos = size
            elif state == START:
                available = len(buf) - pos
                if buf[pos:pos + 4] == b"AMQP"[:min(4, available)] and available < PROTOCOL_HEADER_SIZE \
                        and not final:
                    break
                if buf[pos:pos + 4] == b"AMQP" and available >= PROTOCOL_HEADER_SIZE:
                    header = parse_protocol_header(buf[pos:pos + PROTOCOL_HEADER_SIZE])
                    self.state = self.connection.protocol_header(self, header, self.base + pos)
                    codec = self.connection.codec
                    pos += PROTOCOL_HEADER_SIZE
                elif self.mid_stream:
                    # a capture begun inside a connection: AMQP 1.0 frames from a frame's start are
                    # told by their header (no 0-9-1 frame starts with octet 0); else resynchronise
                    self.state = self.connection.mid_stream_start(self, buf, pos)
                else:
                    self.state = self.connection.no_protocol_header(self, buf, pos)
            elif state == RESYNC:
                found, keep = self._find_sync(buf, pos, final)
                if not self.skipped and (keep if found is None else found) > pos:
                    self.skip_first = self._first_byte(self.base + pos)
                if found is None:  # need more bytes; drop what cannot start a frame
                    if keep > pos:  # (its time, before its chunk can be forgotten)
                        self.skip_last = self._first_byte(self.base + keep - 1)
                    self.skipped += keep - pos
                    pos = keep
                    break
                self.skipped += found - pos
                if self.skipped:
                    start = self.base + found - self.skipped
                    self._issue("resync", self._skip_text(start), self.skipped, start,
                                self.base + found, None, self.skip_first,
                                None if found > pos else self.skip_last)  # (the last one dropped already)
                self.skipped = 0
                self.skip_detail = ""  # (said why a carried resynchronisation dropped bytes, if it did)
                pos = found
                self.state = FRAMES
            else:  # SKIP: the rest of a frame interrupted by a gap
                step = min(self.skip_remaining, len(buf) - pos)
                self.skip_remaining -= step
                self.skipped += step
                pos += step
                if self.skip_remaining == 0:
                    self._end_skip(pos)
        return pos

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
        self._issue("gap", self.skip_detail, self.skipped, self.base + pos - self.skipped,
                    self.base + pos, None, self.skip_first)
        self.skipped = 0
        self.skip_detail = ""
        self.state = FRAMES

    def _known_frame_size(self) -> int | None:
        """Wire size of the partial frame at the buffer's start, if its header is there."""
        if self.state != FRAMES or len(self.buf) < FRAME_HEADER_SIZE:
            return None
        frame_type, _, size = _FRAME_HEADER(self.buf, 0)
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
        base = self.base
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
        if i + FRAME_HEADER_SIZE > len(buf):
            return self.base + i + FRAME_HEADER_SIZE
        size = _FRAME_HEADER(buf, i)[2]
        end = i + FRAME_HEADER_SIZE + size
        if end >= len(buf):
            return self.base + end + 1
        return self.base + end + 1 + FRAME_HEADER_SIZE

    def _judge(self, buf: bytearray, i: int, final: bool) -> bool | None:
        """Does a frame start at i? True, False, or None while the bytes to tell are missing."""
        codec = self.connection.codec
        limit = self.connection.settings.resync_max_frame
        verdict = _plausible(codec, buf, i, limit)
        if verdict is False or verdict is None:
            return verdict
        following = _plausible(codec, buf, verdict, limit)
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
                    self.skip_first = self._first_byte(self.base + pos)
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
                        self._report_skipped(self.base + pos, None)
                    header = parse_protocol_header(buf[pos:pos + PROTOCOL_HEADER_SIZE])
                    self.state = self.connection.protocol_header(self, header, self.base + pos)
                    pos += PROTOCOL_HEADER_SIZE
                    if self.state != WALK:
                        break
                    continue
            if available < AMQP_1_0_HEADER:
                if final:  # the stream ends inside a frame header: counted with the run
                    if not self.skipped:
                        self.skip_first = self._first_byte(self.base + pos)
                    self.skipped += available
                    self.skip_detail = "the stream ended inside a frame header"
                    pos = size
                break
            frame_size, offset_words, frame_type = _AMQP_1_0_FRAME(buf, pos)
            if frame_size < 8 or offset_words < 2 or offset_words * 4 > frame_size or frame_type > 1 \
                    or frame_size > self.connection.settings.max_frame:
                # not a 1.0 frame: what follows cannot be walked; counted to the end
                if self.skipped:
                    self._report_skipped(self.base + pos, None)
                self.state = OPAQUE
                self.opaque_kind = NOT_DECODED
                self.skip_detail = (f"AMQP 1.0 framing lost at stream offset {self.base + pos} (a frame header "
                                    f"claiming {frame_size} bytes, data offset {offset_words}, type {frame_type}): "
                                    "the rest of the direction counted, not decoded")
                return pos
            if not self.skipped:
                self.skip_first = self._first_byte(self.base + pos)
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
        buffered = len(self.buf)
        inside = self.state == WALK and not buffered and size < self.skip_remaining
        self._issue("gap", f"{size} bytes not captured" + (
            f"; {buffered} received bytes of an incomplete frame header dropped" if buffered else ""),
            size + buffered, self.base, offset + size, None)
        self.end += size
        self.buf = bytearray()
        self.base = offset + size
        if inside:
            self.skip_remaining -= size
        elif self.state == WALK:
            self.state = OPAQUE
            self.opaque_kind = NOT_DECODED
            self.skip_detail = "AMQP 1.0 framing lost after bytes not captured: the rest counted, not decoded"

    # -- large bodies -------------------------------------------------------------------------

    def _start_body(self, buf: bytearray, pos: int) -> bool:
        if len(buf) - pos < FRAME_HEADER_SIZE:
            return False
        frame_type, channel, size = _FRAME_HEADER(buf, pos)
        if self.connection.codec.frame_types.get(frame_type) != "body" or size < STREAM_BODY_MIN:
            return False
        start = self.base + pos
        first_ts, _, capture, record, _ = self.timestamps(start, start + 1)  # its chunk is forgotten meanwhile
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
                            body.start, self.base + pos, body.channel)
                self.state = RESYNC
            else:
                self.connection.streamed_body(self, body, self.base + pos)
        return pos

    # -- output -------------------------------------------------------------------------------

    def _emit_error(self, error: DecodeError, pos: int) -> None:
        size = error.frame_end - pos
        self._issue(error.kind, error.detail, size, self.base + pos, self.base + error.frame_end,
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
                last = self.timestamps(end - 1, end) if end > start else (first[0], first[0], first[1], first[2],
                                                                          first[2])
                ts = (first[0], last[1], first[1], first[2], last[4] if last[2] == first[1] else 0)
        self.connection.issue(self, kind, detail, skipped, start, end, channel, ts)

    def _first_byte(self, offset: int) -> tuple[int, int, int]:
        first, _, capture, record, _ = self.timestamps(offset, offset + 1)
        return first, capture, record

    # -- carried to the next run (amqp_decode.state frames the blob) ---------------------------

    def saved(self, name, may_send_secrets: bool) -> dict:
        """This direction's framing as plain data for the next run (`name`: capture index -> file
        name). Bytes that may hold credentials are never in it (`_withheld`)."""
        body = self.body.saved(name) if self.body is not None else None
        saved = {"buf": bytes(self.buf), "base": self.base, "end": self.end,
                 "chunks": [(end, ts, name(c), r) for end, ts, c, r in self.chunks], "state": self.state,
                 "mid_stream": self.mid_stream, "skipped": self.skipped,
                 "skip_first": (self.skip_first[0], name(self.skip_first[1]), self.skip_first[2]),
                 "skip_last": (self.skip_last[0], name(self.skip_last[1]), self.skip_last[2]),
                 "skip_remaining": self.skip_remaining,
                 "skip_detail": self.skip_detail, "resync_waiting": sorted(self.resync_live or ()),
                 "resync_scanned": self.resync_scanned, "body": body, "frames": self.frames,
                 "decoded_bytes": self.decoded_bytes, "skipped_bytes": self.skipped_bytes,
                 "walked_frames": self.walked_frames, "walked_sasl": self.walked_sasl,
                 "undecoded_frames": self.undecoded_frames, "opaque_kind": self.opaque_kind}
        if self.buf and (self.state == FRAMES and self.connection.codec.may_hold_secret(self.buf)
                         or self.state == RESYNC and may_send_secrets):
            saved.update(self._withheld(name))
        return saved

    def _withheld(self, name) -> dict:
        """What is saved instead of a buffer that may hold credentials: none of its bytes, and the
        next run skips them with an issue saying why. A frame cut by the run's end whose size is
        known (the codec says which frames may carry credentials) is skipped to its end, framing
        kept; bytes a resynchronisation was still judging (not framed yet: any frame's) are dropped,
        and the resynchronisation goes on from the next run's first byte."""
        held = len(self.buf)
        size = self._known_frame_size() if self.state == FRAMES else None
        first = self._first_byte(self.base) if self.state == FRAMES or not self.skipped else self.skip_first
        withheld = {"buf": b"", "base": self.base + held, "skip_first": (first[0], name(first[1]), first[2])}
        if size is not None:
            withheld.update(state=SKIP, skipped=held, skip_remaining=size - held,
                            skip_detail=f"a {size}-byte frame that may carry credentials was cut by the end of "
                                        "the previous run; its bytes were not saved: the frame is lost, framing kept")
            return withheld
        last = self._first_byte(self.base + held - 1)
        withheld.update(state=RESYNC, skipped=self.skipped + held, skip_last=(last[0], name(last[1]), last[2]),
                        resync_waiting=[], resync_scanned=self.base + held,
                        skip_detail="bytes not yet framed when the previous run ended were not saved (they may "
                                    "carry credentials): skipped until frames were found again")
        return withheld

    def restore(self, state: dict, index) -> None:
        """This direction's framing as `saved` left it (`index`: file name -> capture index)."""
        self.buf = bytearray(state["buf"])
        self.base, self.end = state["base"], state["end"]
        self.chunks = deque((end, ts, index(c), r) for end, ts, c, r in state["chunks"])
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
        if self.buf and self.chunks:
            first = self.timestamps(self.base, self.base + 1)[0]
            if first < low:
                low = first
        if self.state == BODY and self.body is not None:
            if self.body.first_ts < low:
                low = self.body.first_ts
        elif self.skipped and self.skip_first[0] < low:
            low = self.skip_first[0]
        return low

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


def _plausible(codec: Codec, buf: bytearray, i: int, limit: int):
    """False if no frame can start at i; None if more bytes are needed to tell; else its end."""
    if i + FRAME_HEADER_SIZE > len(buf):
        return None
    frame_type, channel, size = _FRAME_HEADER(buf, i)
    if frame_type not in codec.frame_types or size > limit:
        return False
    kind = codec.frame_types[frame_type]
    if kind == "heartbeat" and (size or channel):
        return False
    end = i + FRAME_HEADER_SIZE + size
    if end >= len(buf):
        return None
    return end + 1 if buf[end] == codec.frame_end else False


class _Content:
    """A content-bearing method waiting for its header and bodies on one channel."""

    def __init__(self, records: list | None = None, method: Record | None = None, body_size: int | None = None,
                 received: int = 0, frames: int = 0, intact: bool = True, hasher=None,
                 body: bytearray | None = None, received_bytes: bytes | None = None) -> None:
        self.records = records if records is not None else []
        self.method = method
        self.body_size = body_size
        # Folded content (StreamOptions.fold_content): no header record holds the properties, and
        # the time of the last content frame goes with the message instead
        self.properties = None
        self.last_ns = -1
        self.received = received
        self.frames = frames
        self.intact = intact
        self.hasher = hasher
        self.body = body
        # the body so far, kept only when connections are carried to the next run (the hash must be
        # resumable there, and hashlib's state cannot be saved); None past `resumable_body_cap`.
        # Kept as the frames' own payloads, joined only for a message still open when a run ends:
        # copying every body into one buffer as it came cost about 2% of a decode task.
        self.received_parts = None if received_bytes is None else [bytes(received_bytes)]
        self.received_size = 0 if received_bytes is None else len(received_bytes)

    def saved(self) -> dict:
        """As plain data for the next run: its records, counts and the body so far (which its hash
        resumes from)."""
        return {"records": [record.as_dict() for record in self.records], "body_size": self.body_size,
                "received": self.received, "frames": self.frames, "intact": self.intact,
                "body": bytes(self.body) if self.body is not None else None,
                "received_bytes": self.received_bytes()}

    @staticmethod
    def restored(state: dict, resumable: bool) -> "_Content":
        """The content as `saved` left it (its hash resumed from the body so far)."""
        received = state["received_bytes"]
        records = [as_record(record) for record in state["records"]]
        return _Content(records=records, method=records[0], body_size=state["body_size"], received=state["received"],
                        frames=state["frames"], intact=state["intact"],
                        hasher=hashlib.sha256(received) if received is not None else None,
                        body=bytearray(state["body"]) if state["body"] is not None else None,
                        received_bytes=received if received is not None and resumable else None)

    def received_bytes(self) -> bytes | None:
        """The body so far, as kept for carrying (None: not kept)."""
        return None if self.received_parts is None else b"".join(self.received_parts)


class AmqpConnection(StreamSink):
    """The StreamSink for one TCP connection; appends finished records to `out`."""

    def __init__(self, tcp, connection_id: str, codecs: dict[str, Codec], settings: "StreamOptions",
                 out: list, capture_names: list[str], on_end=None, endpoints: tuple[str, str] | None = None) -> None:
        """`endpoints`: tcp.a and tcp.b as format_endpoint gives them, when the caller has them already."""
        self.tcp = tcp
        self.on_end = on_end
        self.id = connection_id
        self.codecs = codecs
        self.settings = settings
        self.out = out
        self.capture_names = capture_names
        self.endpoints = endpoints or (format_endpoint(*tcp.a), format_endpoint(*tcp.b))
        self.ports = (tcp.a[1], tcp.b[1])
        self.version: str | None = None
        self.codec = codecs[settings.default_version]
        self.frame_start = frame_start_for(self.codec, settings.resync_max_frame)
        self.readers = (FrameReader(self, 0), FrameReader(self, 1))
        self.client: int | None = None  # direction index of the client
        self.labels = ((None, None), (None, None))  # per direction: (client, server) once decided
        self.directions = (None, None)  # per direction: "C>S" / "S>C" once decided
        self.status = "undecided"  # -> "amqp", "not-amqp", "tls"
        # What it speaks when that is not AMQP 0-9-1 or 0-9 though its bytes go to the readers:
        # "amqp-1.0" (walked), or another protocol its client's first bytes named ("http", ...)
        self.protocol: str | None = None
        self.pending: list[tuple[int, dict]] = []
        self.contents: dict[tuple[int, int], _Content] = {}
        self.ignored_bytes = 0
        # While undecided: what came, in order ((direction, offset, data, ts, capture, record)
        # and gaps (direction, offset, size, ts)), for the readers once the bytes tell.
        self.held: list[tuple] = []
        self.held_bytes = 0
        self.first_capture = -1  # file of the first byte: the capture for records tied to no packet
        self.client_reason: str | None = None
        self.end_reason: str | None = None
        self.headers_folded = self.bodies_folded = 0  # content frames that made no record (fold_content)

    # -- StreamSink -----------------------------------------------------------------------------

    def data(self, direction: int, offset: int, data: bytes, ts_ns: int, capture: int, record: int) -> None:
        if self.first_capture < 0:
            self.first_capture = capture
        if self.status == "undecided":
            self.held.append((direction, offset, data, ts_ns, capture, record))
            self.held_bytes += len(data)
            self._classify(direction)
            if self.status == "undecided":
                return
            self._replay_held()
            return
        if self.status != "amqp":
            self.ignored_bytes += len(data)
            return
        reader = self.readers[direction]  # (typed in stream.pxd: compiled, a C call)
        reader.data(offset, data, ts_ns, capture, record)

    def gap(self, direction: int, offset: int, size: int, ts_ns: int) -> None:
        if self.status == "amqp":
            reader = self.readers[direction]
            reader.gap(offset, size, ts_ns)
        elif self.status == "undecided":
            self.held.append((direction, offset, size, ts_ns))

    def conflict(self, direction: int, offset: int, size: int, ts_ns: int) -> None:
        if self.status == "amqp":
            reader = self.readers[direction]
            self.issue(reader, "retransmission-conflict", f"a retransmission carried {size} bytes that differ "
                       "from the first copy; the first copy was decoded", 0, offset, offset + size, None,
                       (ts_ns, ts_ns, -1, 0, 0))

    def end(self, reason: str, ts_ns: int) -> None:
        self.end_reason = reason
        if self.status == "undecided" and self.held_bytes:  # the stream ended before its bytes told
            self._classify(-1)
            self._replay_held()
        if self.status == "tls":  # flagged, not decoded: one issue with what was skipped
            client = self._port_guess(self.settings.tls_ports)
            self._decide_client(client if client is not None else self.tcp.syn_from, "TLS port")
            self.issue(self.readers[0], "tls-not-decoded", f"connection on a TLS port: {self.ignored_bytes} "
                       "encrypted bytes not decoded", self.ignored_bytes, 0, 0, None,
                       (self.tcp.first_ts_ns, self.tcp.last_ts_ns, -1, 0, 0))
        if self.status == "amqp":
            for reader in self.readers:
                reader.finish()
            for key in list(self.contents):
                self._close_content(key, complete=False, why="connection ended")
            if self.client is None:
                self._decide_client(self._port_guess(), "guessed from ports")
        # After every record of the connection: what consumes records learns of the end in order.
        self.out.append(end_record(self.id, self.summary()))
        if self.on_end is not None:
            self.on_end(self)
        # Its last use: the readers and this connection refer to each other, and it to its TCP
        # connection (amqp_decode.tcp.TcpConnection.end says why the cycles are broken here).
        for reader in self.readers:
            reader.connection = None
        self.tcp = None

    # -- carried to the next run (amqp_decode.state frames the blob) ---------------------------

    def may_send_secrets(self, direction: int) -> bool:
        """Credentials travel from the client: its direction, or either while the client is unknown."""
        return self.client is None or self.client == direction

    def saved(self, name) -> dict:
        """The AMQP side as plain data for the next run (`name`: capture index -> file name): its
        identity and what it decided, records waiting for the client's side, messages whose content
        is still arriving, each direction's framing (FrameReader.saved)."""
        return {"id": self.id, "version": self.version, "protocol": self.protocol, "client": self.client,
                "client_reason": self.client_reason, "status": self.status,
                "pending": [(direction, record.as_dict()) for direction, record in self.pending],
                "ignored_bytes": self.ignored_bytes, "first_capture": name(self.first_capture),
                "contents": {key: content.saved() for key, content in self.contents.items()},
                "readers": [reader.saved(name, self.may_send_secrets(reader.direction)) for reader in self.readers]}

    def restore(self, state: dict, index, flipped: bool) -> None:
        """The AMQP side as `saved` left it; `flipped`: this run saw the other side first (the saved
        directions are swapped)."""
        self.id = state["id"]
        version = state["version"]
        if version is not None and version in self.codecs:
            self.version = version
            self.codec = self.codecs[version]
            self.frame_start = frame_start_for(self.codec, self.settings.resync_max_frame)
        self.status, self.protocol = state["status"], state.get("protocol")
        if self.protocol == "amqp-1.0":
            self.version = version
        self.ignored_bytes = state["ignored_bytes"]
        self.first_capture = index(state["first_capture"])
        if state["client"] is not None:
            self._decide_client(1 - state["client"] if flipped else state["client"], state["client_reason"])
        self.pending = [((1 - d) if flipped else d, as_record(record)) for d, record in state["pending"]]
        self.contents = {((1 - direction) if flipped else direction, channel): _Content.restored(
            saved, self.settings.resumable) for (direction, channel), saved in state["contents"].items()}
        readers = state["readers"][::-1] if flipped else state["readers"]
        for reader, saved in zip(self.readers, readers):
            reader.restore(saved, index)

    def earliest_pending(self, low: int) -> int:
        """The earliest time a record still to come from this connection can carry, if before
        `low`: its end (timed by its last packet) once closed, its out-of-order segments, its bytes
        held while undecided, its readers' partial frames and skipped bytes, its messages awaiting
        their content, its records awaiting the client's side. A TLS connection's one issue is
        timed at its first packet; one not AMQP makes no record."""
        status = self.status
        if status == "not-amqp":
            return low
        tcp = self.tcp
        if tcp.closed_at is not None and tcp.last_ts_ns < low:
            low = tcp.last_ts_ns
        if status == "tls":
            return low
        for half in tcp.halves:
            low = half.earliest_pending(low)
        if status == "undecided":
            for held in self.held:  # bytes (direction, offset, data, ts_ns, ...) and gaps (..., ts_ns)
                if held[3] < low:
                    low = held[3]
            return low
        for reader in self.readers:
            low = reader.earliest_pending(low)
        for content in self.contents.values():
            if content.method.ts_ns < low:
                low = content.method.ts_ns
        for _, record in self.pending:
            if record.ts_ns < low:
                low = record.ts_ns
        return low

    def speaks(self) -> str:
        """What the tables say the connection is (their `status`): amqp (0-9-1 or 0-9, decoded),
        amqp-1.0 (walked), another protocol its client spoke (http, tls, mqtt...: counted), tls (on
        a TLS port), not-amqp, or no-payload."""
        if self.status == "undecided":
            return "no-payload"
        if self.status == "amqp" and self.protocol is not None:
            return self.protocol
        return self.status

    def summary(self) -> dict:
        """Per-connection facts for reports and byte accounting (direction labels as in records)."""
        directions = {}
        for reader in self.readers:
            label = "?" if self.client is None else (
                CLIENT_TO_SERVER if reader.direction == self.client else SERVER_TO_CLIENT)
            half = self.tcp.halves[reader.direction]
            directions[label] = {"stream_bytes": half.next, "decoded_bytes": reader.decoded_bytes,
                                 "skipped_bytes": reader.skipped_bytes, "frames": reader.frames,
                                 "undecoded_frames": reader.undecoded_frames,
                                 "packets": half.packets, "duplicate_bytes": half.duplicate_bytes}
        client = self.client if self.client is not None else 0
        capture = self.tcp.first_capture
        return {"connection": self.id, "status": self.speaks(),
                "capture": self.capture_names[capture] if capture >= 0 else None, "client": self.endpoints[client],
                "server": self.endpoints[1 - client], "client_decided_by": self.client_reason,
                "version": self.version, "first_ts_ns": self.tcp.first_ts_ns,
                "last_ts_ns": self.tcp.last_ts_ns, "syn_seen": self.tcp.syn_from is not None,
                "end_reason": self.end_reason, "ignored_bytes": self.ignored_bytes,
                "directions": directions}

    # -- classification -------------------------------------------------------------------------

    def syn_seen(self, direction: int) -> bool:
        return self.tcp.halves[direction].syn

    def _classify(self, direction: int) -> None:
        """Decide what the connection carries, from its ports, else from the bytes held so far
        (`direction` sent the latest; -1: the stream ended, decide with what there is)."""
        if self.ports[0] in self.settings.tls_ports or self.ports[1] in self.settings.tls_ports:
            self.status = "tls"
            return
        on_port = self.ports[0] in self.settings.amqp_ports or self.ports[1] in self.settings.amqp_ports
        verdict = True if on_port else self._looks_amqp(direction)
        if verdict is None:
            if direction >= 0 and self.held_bytes < UNDECIDED_HOLD:
                return  # too few bytes to tell yet: hold them
            verdict = False
        if not verdict:
            self.status = "not-amqp"
            return
        self.status = "amqp"
        if self.tcp.syn_from is not None:
            self._decide_client(self.tcp.syn_from, "SYN")
        elif on_port and not self._starts(b"AMQP"):
            port_client = self._port_guess()
            if port_client is not None:
                self._decide_client(port_client, "port")

    def _looks_amqp(self, direction: int):
        """On a port of no known protocol: True when a direction's first bytes are a protocol
        header or AMQP frames (a capture may begin mid-connection, or with the server's segment),
        False when they cannot be, None when more bytes are needed. A protocol header split over
        segments is waited for; frames must chain (two, or one ending exactly where the bytes do,
        a method the spec knows), so another binary protocol is not taken for AMQP."""
        undecided = False
        for side in (0, 1):
            head = self._head(side)
            if not head:
                continue
            if head[:4] == b"AMQP":
                return True
            if len(head) < 4 and b"AMQP".startswith(head):
                undecided = True
                continue
            verdict = self._frames_at_start(head)
            if verdict:
                return True
            if verdict is None:
                undecided = True
        return None if undecided else False

    def _frames_at_start(self, head: bytes):
        codec = self.codec
        first = _plausible(codec, head, 0, self.settings.resync_max_frame)
        if first is None or first is False:
            return first
        if head[0] == 1:  # a method frame: its class and method must be the spec's
            if first - 1 < FRAME_HEADER_SIZE + 4:
                return False
            class_method = int.from_bytes(head[FRAME_HEADER_SIZE:FRAME_HEADER_SIZE + 4], "big")
            if class_method not in codec._methods:
                return False
        if first == len(head):
            return True if head[0] == 1 else None
        second = _plausible(codec, head, first, self.settings.resync_max_frame)
        return second if second is None or second is False else True

    def _head(self, side: int) -> bytes:
        """The bytes held of one direction from its first held byte, up to a gap."""
        parts, expected = [], -1
        for item in self.held:
            if item[0] != side:
                continue
            if len(item) == 4 or (expected >= 0 and item[1] != expected):
                break
            parts.append(item[2])
            expected = item[1] + len(item[2])
        return b"".join(parts)

    def _starts(self, prefix: bytes) -> bool:
        return any(self._head(side).startswith(prefix) for side in (0, 1))

    def _replay_held(self) -> None:
        """The held bytes and gaps, in their order, to the frame readers (or counted as ignored)."""
        held, self.held, self.held_bytes = self.held, [], 0
        for item in held:
            if len(item) == 4:
                if self.status == "amqp":
                    self.readers[item[0]].gap(*item[1:])
            elif self.status == "amqp":
                self.readers[item[0]].data(*item[1:])
            else:
                self.ignored_bytes += len(item[2])

    def _port_guess(self, server_ports: frozenset[int] | None = None) -> int | None:
        """The client's direction when exactly one side is on a server port."""
        server_ports = self.settings.amqp_ports if server_ports is None else server_ports
        a_amqp = self.ports[0] in server_ports
        b_amqp = self.ports[1] in server_ports
        if a_amqp != b_amqp:
            return 1 if a_amqp else 0
        return None

    def protocol_header(self, reader: FrameReader, header, offset: int) -> int:
        """A protocol header from `reader`'s side: a record (the client's picks the spec); returns
        the state the reader goes on in: framing, or for AMQP 1.0 walking its frames (its TLS
        layer: counting the TLS records that follow)."""
        version = header.version
        if self.client is None or self.client == reader.direction:
            if self.client is None:
                self._decide_client(reader.direction, "protocol header")
            if version in self.codecs:
                self.version = version
                self.codec = self.codecs[version]
                self.frame_start = frame_start_for(self.codec, self.settings.resync_max_frame)
            elif version == "1.0":
                self.version = version
                self.protocol = "amqp-1.0"
        record = self._record(reader, "protocol-header", offset, offset + PROTOCOL_HEADER_SIZE, None)
        description, raw = protocol_header_texts(header)
        record.version = version
        record.protocol_header = description
        record.raw = raw
        if header.is_amqp and version not in self.codecs and version != "1.0":
            self.issue(reader, "unsupported-version", f"{description}: no spec loaded for it; decoding as "
                       f"{self.codec.spec.version}", 0, offset, offset + PROTOCOL_HEADER_SIZE, None)
        reader.decoded_bytes += PROTOCOL_HEADER_SIZE
        reader.frames += 1
        if self.protocol != "amqp-1.0":
            return FRAMES
        if version == "1.0" and header.raw[4] == 2:  # AMQP 1.0's TLS layer: TLS records follow
            reader.opaque_kind = "tls-not-decoded"
            reader.skip_detail = "TLS inside AMQP 1.0 (its TLS layer): not decrypted"
            return OPAQUE
        return WALK

    def no_protocol_header(self, reader: FrameReader, buf, pos: int) -> int:
        """A stream seen from its start that does not begin with 'AMQP'; returns the state its
        reader goes on in. From a server that is normal (its first frame), unless its client spoke
        another protocol. From the client it is another protocol, reported with its first bytes and
        named when they tell which (amqp_decode.other_protocols): its bytes are then counted, not
        framed; unnamed, framing resynchronises (a client that skipped its header may still talk AMQP)."""
        if reader.direction != self.tcp.syn_from:
            if self.protocol is not None and self.protocol != "amqp-1.0":
                return self._counted(reader, "from the server of a client that spoke " + self.protocol)
            return FRAMES
        first = bytes(buf[pos:pos + 64])
        header = parse_protocol_header(first[:PROTOCOL_HEADER_SIZE].ljust(PROTOCOL_HEADER_SIZE, b"\0"))
        named = name_protocol(first)
        if named is None:
            self.issue(reader, "not-amqp-header", f"the client's first bytes are not an AMQP protocol header: "
                       f"{header.description}", 0, pos + reader.base, pos + reader.base, None)
            return RESYNC
        self.protocol, name = named
        self.issue(reader, "not-amqp-header", f"the client speaks {name}, not AMQP (its first bytes: "
                   f"{first[:PROTOCOL_HEADER_SIZE].hex(' ')})", 0, pos + reader.base, pos + reader.base, None)
        return self._counted(reader, f"{name} from the client")

    def _counted(self, reader: FrameReader, what: str) -> int:
        reader.opaque_kind = "tls-not-decoded" if self.protocol == "tls" else NOT_DECODED
        reader.skip_detail = f"{what}: counted, not decoded"
        return OPAQUE

    def mid_stream_start(self, reader: FrameReader, buf, pos: int) -> int:
        """The state a reader whose stream began mid-connection starts in: walking AMQP 1.0 when
        its first bytes are 1.0 frames (or the connection is 1.0 already: then counting, as its
        frames cannot be found again), else resynchronising onto 0-9-1 frames."""
        if starts_with_1_0_frames(buf, pos, self.settings.max_frame):
            if self.protocol is None:
                self.protocol, self.version = "amqp-1.0", "1.0"
            return WALK
        if self.protocol == "amqp-1.0":
            reader.opaque_kind = NOT_DECODED
            reader.skip_detail = "AMQP 1.0 begun before the capture, not at a frame's start: counted, not decoded"
            return OPAQUE
        return RESYNC

    def _decide_client(self, direction: int | None, how: str) -> None:
        if direction is None:
            direction = 0
            how = "unknown: assumed the first source seen"
        self.client = direction
        self.client_reason = how
        ends = (self.endpoints[direction], self.endpoints[1 - direction])
        self.labels = (ends, ends)
        self.directions = (CLIENT_TO_SERVER, SERVER_TO_CLIENT) if direction == 0 else (SERVER_TO_CLIENT, CLIENT_TO_SERVER)
        pending, self.pending = self.pending, []
        for record_direction, record in pending:
            self._label(record_direction, record)
            self.out.append(record)

    # -- frames -> records ---------------------------------------------------------------------

    def frame(self, reader: FrameReader, frame, start: int, end: int) -> None:
        kind = frame.kind
        channel = frame.channel
        if kind == "method":
            method_frame = frame  # (typed as its subclass in stream.pxd: compiled, its reads are C)
            method = method_frame.method
            if self.client is None and len(method.directions) == 1:
                sent_by_client = CLIENT_TO_SERVER in method.directions
                self._decide_client(reader.direction if sent_by_client else 1 - reader.direction,
                                    f"direction of {method.full_name}")
            key = (reader.direction, channel)
            if self.contents and key in self.contents:
                self._close_content(key, complete=False, why=f"{method.full_name} on the same channel")
            record = self._record(reader, "method", start, end, channel, hold=True)
            record.method = method.full_name
            record.class_id = method.class_id
            record.method_id = method.method_id
            record.args = method_frame.args
            if not method.content:
                self._release(reader.direction, record)
            else:
                self.contents[key] = _Content(records=[record], method=record,
                                              hasher=hashlib.sha256(),
                                              body=bytearray() if self.settings.capture_bodies else None,
                                              received_bytes=bytearray() if self.settings.resumable else None)
        elif kind == "header":
            header = frame  # (typed as its subclass, as above)
            content = self.contents.get((reader.direction, channel))
            if content is not None and content.body_size is None and self.settings.fold_content:
                self._fold(reader, content, start, end)
                self.headers_folded += 1
                content.properties = header.properties
                content.body_size = header.body_size
                if header.body_size == 0:
                    self._close_content((reader.direction, channel), complete=True)
                self._warn(reader, frame, start, end, channel)
                return
            orphan = content is None or content.body_size is not None
            record = self._record(reader, "header", start, end, channel, hold=not orphan)
            record.class_name = header.class_name
            record.class_id = header.class_id
            record.weight = header.weight
            record.body_size = header.body_size
            record.property_flags = list(header.property_flags)
            record.properties = header.properties
            if orphan:
                self.issue(reader, "unexpected-header", "content header without its content method (not captured, "
                           "or a protocol error)", 0, start, end, channel)
            else:
                content.records.append(record)
                content.body_size = header.body_size
                if header.body_size == 0:
                    self._close_content((reader.direction, channel), complete=True)
        elif kind == "body":
            body = frame  # (typed as its subclass, as above)
            self._body(reader, channel, body.payload, start, end)
        elif kind == "heartbeat":
            self._record(reader, "heartbeat", start, end, channel)
        else:  # a frame type the spec defines but nothing here interprets (0-9 trace, oob-*)
            self.issue(reader, "uninterpreted-frame", f"{frame.type_name} frame (type {frame.frame_type}) of "
                       f"{frame.size} bytes: framed, not interpreted", 0, start, end, channel)
        self._warn(reader, frame, start, end, channel)

    def _warn(self, reader: FrameReader, frame, start: int, end: int, channel) -> None:
        """An issue record per warning the frame's decoding gave."""
        warnings = frame.warnings
        if warnings:
            for warning in warnings:
                self.issue(reader, warning.kind, warning.detail, 0, start, end, channel)

    def _body(self, reader: FrameReader, channel: int, payload, start: int, end: int,
              intact: bool = True, ts=None) -> None:
        key = (reader.direction, channel)
        content = self.contents.get(key)
        size = end - start - 8
        if content is None or content.body_size is None:
            record = self._record(reader, "body", start, end, channel)
            record.body_frame_size = size
            self.issue(reader, "unexpected-body", "content body without its method and header (not captured, or "
                       "a protocol error)", 0, start, end, channel)
            return
        if payload is not None:
            self._hash(content, payload)
        content.received += size
        content.frames += 1
        content.intact &= intact
        if self.settings.fold_content:
            self._fold(reader, content, start, end, ts)
            self.bodies_folded += 1
        else:
            record = self._record(reader, "body", start, end, channel, hold=True, ts=ts)
            record.body_frame_size = size
            content.records.append(record)
        if content.received >= content.body_size:
            self._close_content(key, complete=content.received == content.body_size)

    def body_bytes(self, reader: FrameReader, channel: int, data) -> None:
        """Part of a large body frame, as it streams in."""
        content = self.contents.get((reader.direction, channel))
        if content is not None and content.body_size is not None:
            self._hash(content, data)

    def body_mark(self, reader: FrameReader, channel: int):
        """Where a large body frame's bytes start in its message's kept bytes: (body, bytes kept
        for carrying; -1 for none), to take them out again if the frame is lost."""
        content = self.contents.get((reader.direction, channel))
        if content is None or content.body_size is None:
            return None
        return (len(content.body) if content.body is not None else -1,
                len(content.received_parts) if content.received_parts is not None else -1)

    def body_lost(self, reader: FrameReader, body: BodyFrame) -> None:
        """A large body frame streamed in part, then lost (bad frame-end, a gap past it, the
        stream's end): its bytes leave the message's body, and the message cannot be complete."""
        content = self.contents.get((reader.direction, body.channel))
        mark = body.mark
        if content is None or mark is None:
            return
        content.intact = False
        if content.body is not None and mark[0] >= 0:
            del content.body[mark[0]:]
        if content.received_parts is not None and mark[1] >= 0:
            del content.received_parts[mark[1]:]
            content.received_size = sum([len(part) for part in content.received_parts])

    def streamed_body(self, reader: FrameReader, body: BodyFrame, end: int) -> None:
        last = reader.timestamps(end - 1, end)
        self._body(reader, body.channel, None, body.start, end, intact=body.intact,
                   ts=(body.first_ts, last[1], body.capture, body.record, last[4] if last[2] == body.capture else 0))
        reader.frames += 1
        reader.decoded_bytes += body.size + 8 - body.lost

    def _hash(self, content: _Content, data) -> None:
        if content.hasher is not None:  # (None: resumed without its start, the hash is lost)
            content.hasher.update(data)
        if content.received_parts is not None:
            if content.received_size + len(data) <= self.settings.resumable_body_cap:
                # (a frame's payload is bytes of its own; a streamed part is a view of the reader's
                # buffer, which changes: copied)
                content.received_parts.append(data if type(data) is bytes else bytes(data))
                content.received_size += len(data)
            else:
                content.received_parts = None  # too big to carry: its hash will not be resumable
        if content.body is not None and len(content.body) < self.settings.body_cap:
            content.body += data[:self.settings.body_cap - len(content.body)]

    def _fold(self, reader: FrameReader, content: _Content, start: int, end: int, ts=None) -> None:
        """A content frame that makes no record (StreamOptions.fold_content): only its time is kept,
        the latest of the message's for its `last_frame_ns`."""
        first = ts[0] if ts is not None else reader.timestamps(start, end)[0]
        if first > content.last_ns:
            content.last_ns = first

    def _close_content(self, key, complete: bool, why: str = "") -> None:
        content = self.contents.pop(key)
        complete = complete and content.intact and content.body_size is not None
        header = content.records[1] if len(content.records) > 1 else None
        summary = {"body_size": content.body_size, "body_received": content.received,
                   "body_frames": content.frames, "complete": complete,
                   "body_sha256": content.hasher.hexdigest() if complete and content.hasher is not None else None,
                   "properties": header.properties if header is not None else content.properties}
        if content.last_ns >= 0:
            summary["last_frame_ns"] = content.last_ns
        if content.body is not None:
            summary["body_b64"] = base64.b64encode(bytes(content.body)).decode()
            summary["body_truncated"] = content.received > len(content.body)
        method = content.method
        add_message(method, summary)
        direction, channel = key
        if method.dir is not None:  # labelled when made: the client was known already
            self.out.extend(content.records)
        else:
            for record in content.records:
                self._release(direction, record)
        if not complete and why:
            reader = self.readers[direction]
            self.issue(reader, "content-incomplete", f"{method.method} content ended after {content.received} of "
                       f"{content.body_size if content.body_size is not None else '?'} body bytes ({why})", 0,
                       method.offset, method.offset, channel)

    def issue(self, reader: FrameReader, kind: str, detail: str, skipped: int, start: int, end: int,
              channel, ts=None) -> None:
        record = self._record(reader, "issue", start, end, channel, ts=ts)
        record.issue_kind = kind
        record.detail = detail
        record.bytes_skipped = skipped

    def _record(self, reader: FrameReader, kind: str, start: int, end: int, channel, hold: bool = False,
                ts=None) -> Record:
        """A record in the JSON Lines contract (docs/decode.md) with the common keys; the caller sets
        its kind's. Labelled with the client and direction now, or once the client side is known.
        `hold`: the caller releases it (a content method's records wait for its content)."""
        first, last, capture, first_record, last_record = ts if ts is not None else reader.timestamps(start, end)
        if capture < 0:
            capture = self.first_capture
        ends = self.labels[reader.direction]
        record = new_record(kind, first, last, self.capture_names[capture] if capture >= 0 else None,
                            first_record or None, last_record or None, self.tcp.streams.get(capture), self.id,
                            ends[0], ends[1], self.directions[reader.direction], channel, start, end - start)
        if not hold:
            if self.client is None:
                self._release(reader.direction, record)
            else:
                self.out.append(record)
        return record

    def _release(self, direction: int, record: Record) -> None:
        if self.client is None:
            self.pending.append((direction, record))
            if len(self.pending) > self.settings.pending_records:
                self._decide_client(self._port_guess(), "guessed from ports")
            return
        self._label(direction, record)
        self.out.append(record)

    def _label(self, direction: int, record: Record) -> None:
        ends = self.labels[direction]
        record.client = ends[0]
        record.server = ends[1]
        record.dir = self.directions[direction]


UNDECIDED_HOLD = 1 << 16  # bytes held on a port of no known protocol before deciding it is not AMQP


class StreamOptions:
    """What the stream decoder reads of the settings, flattened once per decoder (some are read on
    hot paths)."""

    __slots__ = ("amqp_ports", "tls_ports", "default_version", "max_frame", "resync_max_frame",
                 "capture_bodies", "body_cap", "pending_records", "resumable", "resumable_body_cap", "fold_content")

    def __init__(self, settings: Settings, resumable: bool = False, fold_content: bool = False) -> None:
        decode, bodies = settings.decode, settings.bodies
        self.amqp_ports = frozenset(decode.amqp_ports)
        self.tls_ports = frozenset(decode.tls_ports)
        self.default_version = decode.default_version
        self.max_frame = decode.max_frame_bytes
        self.resync_max_frame = decode.resync_max_frame_bytes
        self.capture_bodies = bodies.capture
        self.body_cap = bodies.cap_bytes
        self.pending_records = decode.pending_records
        self.resumable = resumable  # connections may be saved at the end (amqp_decode.state)
        self.resumable_body_cap = settings.state.max_partial_body_bytes
        # A content method's header and body frames make no records of their own: its `message`
        # says what they were, and `last_frame_ns` when the last came (the one-line-per-message view)
        if fold_content and resumable:  # a saved message is resumed from its records (amqp_decode.state)
            raise ValueError("content frames cannot be folded on connections that may be saved")
        self.fold_content = fold_content
