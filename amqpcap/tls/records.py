"""TLS record framing of one direction: its TCP bytes in, whole records out to the layer (RFC
5246, 6.2; RFC 8446, 5.1: a 5-byte header, content type, version and length, then the fragment).

A `RecordReader` is a state machine with one method per state (`RecordState`): framing records
(`_framing`), skipping the rest of a record a gap cut (`_skipping`: its header told its length, so
framing is kept), resynchronising after a gap that ran past a record's end (`_resyncing`: on the
first offset where a plausible header's record is followed by another plausible header), and
counting bytes that are not TLS at all (`_counting`). A record completes in the delivery that brings
its last byte: that packet is when and where its plaintext comes (as Wireshark shows a decrypted
record in the frame that completes it). Whatever is not in a whole record goes to the layer as lost
(`RecordSink.lost`), with where it lies.
"""

from __future__ import annotations

from enum import IntEnum

HEADER = 5
CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE, APPLICATION_DATA, HEARTBEAT = 20, 21, 22, 23, 24
CONTENT_TYPES = {20: "change_cipher_spec", 21: "alert", 22: "handshake", 23: "application_data", 24: "heartbeat"}
MAX_RECORD = (1 << 14) + 2048  # TLSCiphertext's largest fragment (RFC 5246, 6.2.3)
# A fragment up to this size goes to the layer as bytes of its own (copying it costs less than a
# view); a larger one as a view of the bytes it arrived in
COPIED_FRAGMENT = 4096
COMPILED = __file__.endswith((".so", ".pyd"))  # (compiled: slices of bytes made in C, records.pxd)
# What bytes that made no record are (the kinds of the issues the layer reports them in)
GAP, RESYNC_KIND, TRUNCATED = "tls-gap", "tls-resync", "tls-truncated"
# The constants above again, as C values when compiled (records.pxd); the public names stay Python
# objects, which the layer imports
_COPIED_FRAGMENT = COPIED_FRAGMENT
_HEADER, _CHANGE_CIPHER_SPEC, _HANDSHAKE, _HEARTBEAT, _MAX_RECORD = HEADER, CHANGE_CIPHER_SPEC, HANDSHAKE, HEARTBEAT, \
    MAX_RECORD


class RecordState(IntEnum):
    """A RecordReader's states (compiled: C ints, the module's names below)."""

    RECORDS, SKIP, RESYNC, OPAQUE = range(4)


RECORDS, SKIP, RESYNC, OPAQUE = map(int, RecordState)


def plausible_header(header: bytes, version: int) -> int:
    """The fragment length a 5-byte record header says (-1: no record starts with it).
    `version`: the record version every record of the connection carries (0: not known yet)."""
    ctype = header[0]
    if ctype < _CHANGE_CIPHER_SPEC or ctype > _HEARTBEAT or header[1] != 3:
        return -1
    if version:
        if (header[1] << 8 | header[2]) != version:
            return -1
    elif header[2] > 4:
        return -1
    length = header[3] << 8 | header[4]
    if length == 0 or length > _MAX_RECORD:
        return -1
    return length


def plausible(buf, i: int, version: int) -> int:
    """The end of a record whose header is at i (-1: none can start there, 0: more bytes needed).
    `version`: the record version every record of the connection carries (0: not known yet)."""
    if len(buf) - i < _HEADER:
        return 0
    ctype = buf[i]
    if ctype < _CHANGE_CIPHER_SPEC or ctype > _HEARTBEAT or buf[i + 1] != 3:
        return -1
    if version:
        if (buf[i + 1] << 8 | buf[i + 2]) != version:
            return -1
    elif buf[i + 2] > 4:
        return -1
    length = buf[i + 3] << 8 | buf[i + 4]
    if length == 0 or length > _MAX_RECORD:
        return -1
    return i + _HEADER + length


class RecordSink:
    """What a RecordReader tells its layer (amqpcap.tls.layer.TlsLayer): a base class, so the
    compiled reader calls it directly."""

    def record(self, reader: "RecordReader", ctype: int, header: bytes, fragment: bytes, start: int,
               first: tuple, ts_ns: int, capture: int, record: int) -> None:
        """A whole record at stream offset `start`; `first`: (ts_ns, capture, record) of its first byte."""
        raise NotImplementedError

    def lost(self, reader: "RecordReader", start: int, end: int, records: int, kind: str, why: str, first: tuple,
             ts_ns: int) -> None:
        """Stream bytes [start, end) that made no record, and why (`kind`: GAP, bytes not captured;
        RESYNC, bytes that are no record; TRUNCATED, the stream ended inside a record). `records`:
        how many records they were, when framing knew (1: a record a gap cut, framing kept), else -1."""
        raise NotImplementedError

    def not_tls(self, reader: "RecordReader", offset: int, first: tuple) -> None:
        """The bytes at `offset` are no TLS record, and the direction was never framed: the reader
        counts them from here on (`opaque_from`), for the layer to report."""
        raise NotImplementedError


class RecordReader:
    """One direction's records: a state machine over the bytes not framed yet (`buf`, from stream
    offset `base`), which it owns with the time and place of its first byte (`first`)."""

    def __init__(self, sink: RecordSink, direction: int) -> None:
        self.sink = sink
        self.direction = direction
        self.buf = bytearray()
        self.base = 0
        self.end = 0  # stream offset after the last byte received (or lost)
        self.first = (0, -1, 0)  # (ts_ns, capture, record) of buf's first byte
        self.state = RECORDS
        self.version = 0  # record version of the connection's records, once one has been framed
        self.records = 0  # records framed
        self.skip_remaining = 0  # SKIP: bytes of the cut record still to come
        self.lost_from = -1  # offset where the bytes not framed began (-1: none pending)
        self.lost_first = (0, -1, 0)
        self.lost_records = -1  # what framing knows of how many records they are
        self.lost_kind = self.lost_why = ""
        self.opaque_from = -1  # OPAQUE: where the bytes counted, not framed, begin
        self.opaque_first = (0, -1, 0)

    # -- input --------------------------------------------------------------------------------

    def data(self, offset: int, data: bytes, ts_ns: int, capture: int, record: int) -> None:
        if offset != self.end:  # (the TCP layer delivers in order; never crash if it did not)
            if offset > self.end:
                self.gap(self.end, offset - self.end, ts_ns)
            else:
                data = data[self.end - offset:]
                offset = self.end
                if not data:
                    return
        self.end = offset + len(data)
        here = (ts_ns, capture, record)
        if self.buf:
            self.buf += data
            used = self._run(self.buf, self.base, offset, here, False)
            if used:
                try:
                    del self.buf[:used]
                except BufferError:  # (a view of a fragment still held somewhere: the rest copied)
                    self.buf = bytearray(self.buf[used:])
                self.base += used
                if self.base >= offset:
                    self.first = here
            return
        used = self._run(data, offset, offset, here, False)
        if used < len(data):
            self.buf = bytearray(data[used:])
            self.first = here
        self.base = offset + used

    def gap(self, offset: int, size: int, ts_ns: int) -> None:
        """`size` bytes from `offset` were never captured."""
        if offset > self.end:  # (a gap after a gap)
            size += offset - self.end
            offset = self.end
        gap_end = offset + size
        self.end = gap_end
        held = len(self.buf)
        state = self.state
        if state == OPAQUE:
            self.buf = bytearray()
            self.base = gap_end
            return
        first = self.first if held else (ts_ns, -1, 0)
        if state == RECORDS:
            record_end = plausible(self.buf, 0, self.version) if held else -1
            if record_end > 0 and self.base + record_end >= gap_end:
                self._pending(self.base, first, 1, GAP,
                              f"{size} bytes not captured inside a {record_end - HEADER}-byte record")
                self.skip_remaining = self.base + record_end - gap_end
                self.state = SKIP
                self.buf = bytearray()
                self.base = gap_end
                if not self.skip_remaining:
                    self._end_skip(gap_end, ts_ns)
                return
            self._pending(self.base, first, -1, GAP, f"{size} bytes not captured" + (
                f" ({held} bytes of a record were held)" if held else ""))
        elif state == SKIP:
            if size < self.skip_remaining:
                self.skip_remaining -= size
                return
            self.lost_records = -1
            self.lost_why += f"; {size} more bytes not captured past the record's end"
        else:  # RESYNC: what was dropped so far, and the gap, are one loss
            if self.lost_from >= 0:
                self.lost_kind = GAP
                self.lost_why += f"; {size} bytes not captured"
            self._pending(self.base, first, -1, GAP, f"{size} bytes not captured")
        self.buf = bytearray()
        self.base = gap_end
        self.state = RESYNC

    def finish(self, ts_ns: int) -> None:
        """The stream ended: what was not framed is lost (a record cut short, bytes still being
        resynchronised)."""
        if self.state == RESYNC and self.buf:
            used = self._run(self.buf, self.base, self.end, self.first, True)
            del self.buf[:used]
            self.base += used
        held = len(self.buf)
        if self.state == OPAQUE:
            return
        if self.state == SKIP:
            self.lost_why += f"; the stream ended {self.skip_remaining} bytes before the record's end"
            self._report(self.end, ts_ns)
        elif held or self.lost_from >= 0:
            if self.lost_from < 0:
                self._pending(self.base, self.first, 1 if self.state == RECORDS else -1, TRUNCATED,
                              f"the stream ended inside a record ({held} bytes)")
            self._report(self.end, ts_ns)
        self.buf = bytearray()
        self.base = self.end

    # -- states -------------------------------------------------------------------------------

    def _run(self, buf, base: int, arrived: int, here: tuple, final: bool) -> int:
        """Records from the start of `buf` (stream offset `base`; bytes from offset `arrived` came
        in this delivery, `here` says when and where); returns how many bytes were consumed."""
        pos, size = 0, len(buf)
        while pos < size:
            state = self.state
            if state == RECORDS:
                stop = self._framing(buf, pos, base, arrived, here)
                if stop == pos:
                    break
                pos = stop
            elif state == SKIP:
                pos = self._skipping(buf, pos, base, here[0])
            elif state == RESYNC:
                stop = self._resyncing(buf, pos, base, arrived, here, final)
                if stop == pos and self.state == RESYNC:
                    break
                pos = stop
            else:
                return size  # OPAQUE: counted by the layer from where it began
        return pos

    def _framing(self, buf, pos: int, base: int, arrived: int, here: tuple) -> int:
        """RECORDS: record after record, each handed to the layer once whole: its fragment as a
        view of `buf` (no copy; the layer copies what it keeps), or, a small one in bytes that
        came whole, as bytes of its own."""
        size = len(buf)
        view = None  # (made for the first fragment handed on as a view)
        whole = buf if type(buf) is bytes else None  # (compiled: typed bytes, its slices made in C)
        while size - pos >= _HEADER:
            if whole is None:
                header = bytes(buf[pos:pos + _HEADER])
            elif COMPILED:
                header = _piece(whole, pos, _HEADER)  # noqa: F821
            else:
                header = whole[pos:pos + _HEADER]
            length = plausible_header(header, self.version)
            end = pos + _HEADER + length if length >= 0 else -1
            if end < 0:
                start = base + pos
                first = self.first if start < arrived else here
                if not self.records:  # never framed: not TLS (or not from its start)
                    self.state = OPAQUE
                    self.opaque_from, self.opaque_first = start, first
                    self.sink.not_tls(self, start, first)
                    return size
                self._pending(start, first, -1, RESYNC_KIND,
                              f"a record header that is not TLS's ({bytes(buf[pos:pos + _HEADER]).hex(' ')})")
                self.state = RESYNC
                return pos
            if end > size:
                return pos
            start = base + pos
            self.records += 1
            if not self.version:
                self.version = header[1] << 8 | header[2]
                if self.version == 0x0301 and header[0] == _HANDSHAKE:  # (a ClientHello's: later records say 0x0303)
                    self.version = 0
            if whole is None or length > _COPIED_FRAGMENT:
                if view is None:
                    view = memoryview(buf)
                fragment = view[pos + _HEADER:end]
            elif COMPILED:
                fragment = _piece(whole, pos + _HEADER, length)  # noqa: F821
            else:
                fragment = whole[pos + _HEADER:end]
            self.sink.record(self, header[0], header, fragment, start,
                             self.first if start < arrived else here, here[0], here[1], here[2])
            pos = end
            if self.state != RECORDS:
                break
        return pos

    def _skipping(self, buf, pos: int, base: int, ts_ns: int) -> int:
        """SKIP: the rest of a record a gap cut."""
        step = min(self.skip_remaining, len(buf) - pos)
        self.skip_remaining -= step
        pos += step
        if not self.skip_remaining:
            self._end_skip(base + pos, ts_ns)
        return pos

    def _end_skip(self, end: int, ts_ns: int) -> None:
        self._report(end, ts_ns)
        self.state = RECORDS

    def _resyncing(self, buf, pos: int, base: int, arrived: int, here: tuple, final: bool) -> int:
        """RESYNC: bytes dropped until a plausible record is followed by another (or ends the bytes,
        at the stream's end)."""
        size = len(buf)
        if self.lost_from < 0:
            start = base + pos
            self._pending(start, self.first if start < arrived else here, -1, RESYNC_KIND, "bytes not framed")
        i = pos
        while i < size:
            end = plausible(buf, i, self.version)
            if end == 0 and not final:
                return i  # too few bytes to tell: kept
            if end > 0:
                following = plausible(buf, end, self.version) if end < size else 0
                if following > 0 or (end == size and final):
                    self._report(base + i, here[0])
                    self.state = RECORDS
                    return i
                if following == 0 and not final:
                    return i  # the next header has not arrived yet: judged when it has
            i += 1
        if final:
            return size
        return max(pos, size - HEADER + 1)

    # -- what made no record ------------------------------------------------------------------

    def _pending(self, start: int, first: tuple, records: int, kind: str, why: str) -> None:
        """Bytes from `start` make no record (told once their end is known: `_report`)."""
        if self.lost_from < 0:
            self.lost_from, self.lost_first, self.lost_records = start, first, records
            self.lost_kind, self.lost_why = kind, why
        else:
            self.lost_records = -1

    def _report(self, end: int, ts_ns: int) -> None:
        if self.lost_from >= 0 and end > self.lost_from:
            self.sink.lost(self, self.lost_from, end, self.lost_records, self.lost_kind, self.lost_why,
                           self.lost_first, ts_ns)
        self.lost_from = -1
        self.lost_records = -1
        self.lost_kind = self.lost_why = ""

    # -- carried to the next run ----------------------------------------------------------------

    def saved(self, name) -> dict:
        """As plain data (`name`: capture index -> file name). The bytes of a record not whole yet
        are ciphertext (or a ClientHello's): no key, no plaintext."""
        return {"buf": bytes(self.buf), "base": self.base, "end": self.end,
                "first": (self.first[0], name(self.first[1]), self.first[2]), "state": int(self.state),
                "version": self.version, "records": self.records, "skip_remaining": self.skip_remaining,
                "lost_from": self.lost_from, "lost_first": (self.lost_first[0], name(self.lost_first[1]),
                                                            self.lost_first[2]),
                "lost_records": self.lost_records, "lost_kind": self.lost_kind, "lost_why": self.lost_why,
                "opaque_from": self.opaque_from,
                "opaque_first": (self.opaque_first[0], name(self.opaque_first[1]), self.opaque_first[2])}

    def restore(self, state: dict, index) -> None:
        self.buf = bytearray(state["buf"])
        self.base, self.end = state["base"], state["end"]
        self.first = (state["first"][0], index(state["first"][1]), state["first"][2])
        self.state, self.version, self.records = state["state"], state["version"], state["records"]
        self.skip_remaining = state["skip_remaining"]
        self.lost_from = state["lost_from"]
        self.lost_first = (state["lost_first"][0], index(state["lost_first"][1]), state["lost_first"][2])
        self.lost_records, self.lost_kind, self.lost_why = state["lost_records"], state["lost_kind"], state["lost_why"]
        self.opaque_from = state["opaque_from"]
        self.opaque_first = (state["opaque_first"][0], index(state["opaque_first"][1]), state["opaque_first"][2])

    def earliest_pending(self, low: int) -> int:
        """The time of the first byte held or lost and not yet told, if before `low`."""
        if self.buf and self.first[0] < low:
            low = self.first[0]
        if self.lost_from >= 0 and self.lost_first[0] < low:
            low = self.lost_first[0]
        return low
