"""pcapng packets: blocks (type, length, body, length again) in sections, each section with its own
byte order (Section Header Block) and interfaces (Interface Description Blocks: link type,
snaplen, if_tsresol, if_tsoffset). Packets come in Enhanced Packet Blocks (the bulk, read by the
hot loop), Simple Packet Blocks and the obsolete Packet Blocks; every other block is skipped.

A block's length is repeated at its end, so each block is checked on its own: one whose lengths
disagree is damage, and reading resumes at the next accepted boundary (boundaries.py).
"""

from __future__ import annotations

import struct
from typing import Iterator

from amqpcap.capture.readers.boundaries import (
    ACCEPTED,
    BLOCK_HEADER,
    CHAIN,
    EPB,
    FOUND,
    IDB,
    ISB,
    MAX_BLOCK,
    MORE,
    PB,
    SHB,
    SPB,
    block_length,
    find_pcapng_boundary,
    pcapng_chain,
)
from amqpcap.capture.readers.info import (
    CONCATENATED_CAPTURE,
    DAMAGED_BLOCK,
    GARBAGE_BETWEEN_BLOCKS,
    INCONSISTENT_RANGES,
    TRUNCATED_FILE,
    TRUNCATED_RECORD,
    UNKNOWN_INTERFACE,
    UNREADABLE_TIME,
    CaptureInfo,
    CaptureIssue,
)
from amqpcap.capture.readers.source import CHUNK, Window

NO_END = 1 << 62
# Interface Statistics Block options that count packets the capture lost: isb_ifdrop (dropped by the
# interface or its buffer) and isb_osdrop (by the operating system), both cumulative u64 counters.
DROP_OPTIONS = (5, 7)
LOOKAHEAD = CHAIN * (1 << 18) + CHUNK  # what a boundary search reads on at once (more when blocks are long)
EPB_HEADER = 28  # type, length, interface, ts high, ts low, caplen, origlen
DEFAULT_RESOLUTION = 10**6
# The times a packet can carry: nanoseconds since 1970 in 64 bits (1677 to 2262), what every layer
# after the reader holds them in. A damaged timestamp (or an interface's resolution or offset) can
# put one far outside.
TS_MIN_NS, TS_MAX_NS = -(1 << 63), (1 << 63) - 1


class Interface:
    """One interface of a section: what its packets' timestamps and link layer mean."""

    __slots__ = ("link_type", "snaplen", "resolution", "offset_s", "multiplier", "divisor", "offset_ns")

    def __init__(self, link_type: int, snaplen: int, resolution: int, offset_s: int) -> None:
        self.link_type = link_type
        self.snaplen = snaplen
        self.resolution = resolution  # ticks per second
        self.offset_s = offset_s  # if_tsoffset: seconds added to every timestamp
        # ns = ticks * multiplier // divisor (+ offset_ns): exact for 10**-n and 2**-n resolutions
        if 1_000_000_000 % resolution == 0:
            self.multiplier, self.divisor = 1_000_000_000 // resolution, 1
        else:
            self.multiplier, self.divisor = 1_000_000_000, resolution
        self.offset_ns = offset_s * 1_000_000_000

    @property
    def state(self) -> tuple:
        return (self.link_type, self.resolution, self.offset_s, self.snaplen)


def parse_interface(buf: bytes, p: int, length: int, order: str) -> Interface:
    """The IDB at buf[p] (whole, `length` bytes). Like Scapy, the last if_tsresol wins."""
    link_type, snaplen = struct.unpack_from(order + "HxxI", buf, p + 8)
    resolution, offset_s = DEFAULT_RESOLUTION, 0
    option = struct.Struct(order + "HH")
    o, end = p + 16, p + length - 4
    while o + 4 <= end:
        code, size = option.unpack_from(buf, o)
        if code == 0 or o + 4 + size > end:
            break
        if code == 9 and size == 1:  # if_tsresol: 10**-n, or 2**-n with the top bit set
            value = buf[o + 4]
            resolution = (2 if value & 0x80 else 10) ** (value & 0x7F)
        elif code == 14 and size == 8:  # if_tsoffset
            offset_s = struct.unpack_from(order + "q", buf, o + 4)[0]
        o += 4 + size + (-size & 3)
    return Interface(link_type, snaplen, resolution, offset_s)


class PcapngReader:
    """Packets of one pcapng file, or of the byte range [start, end) of it (see read_records)."""

    def __init__(self, window: Window, info: CaptureInfo, start: int = 0, end: int | None = None,
                 on_close=None, order: str = "<", offsets: bool = False) -> None:
        """`offsets`: packets read on the fast path say where their bytes lie in the file (read_records)."""
        self.window = window
        self.offsets = offsets
        self.info = info
        self.end = NO_END if end is None else end
        self.on_close = on_close
        self.order = order  # of the current section
        self.range_order = order  # a range's ends are judged in the first section's byte order
        self.interfaces: list[Interface] = []
        self.drops: dict[int, int] = {}  # interface -> the largest of its cumulative drop counters (this section)
        self.used: set[int] = set()  # interfaces whose link type and resolution info holds
        self.in_range: list[Interface] | None = []  # IDBs read since the range start (None: a new section)
        self.caught_up = start <= 0
        # A packet without a time of its own (a Simple Packet Block, or an unreadable timestamp) gets
        # the previous packet's: `untimed` says the last packet read was one. A range that begins
        # with one, after packets it did not read (`earlier_packets`), cannot know that time.
        self.untimed = False
        self.earlier_packets = False
        self.start = 0 if start <= 0 else self._first_boundary(start)
        info.start_offset = self.start
        info.start_header = self.state

    @property
    def state(self) -> tuple:
        return ("pcapng", self.order, tuple(i.state for i in self.interfaces))

    def _first_boundary(self, start: int) -> int:
        """B(start), and the section and interfaces in force there, from the blocks at the start of
        the file, past damage as a whole read passes it (interfaces described further on are learnt
        only if a packet names one)."""
        window = self.window
        window.seek(start)
        found = self._find(start)
        boundary = found if found >= 0 else self._end_of_file()
        window.seek(0)
        p = 0
        while window.base + p < boundary:
            if len(window.buf) - p < BLOCK_HEADER + 4:
                window.extend(p, BLOCK_HEADER + 4)
                p = 0
            length, order = block_length(window.buf, p, self.order)
            if length and len(window.buf) - p < length:
                window.extend(p, length)
                p = 0
                length, order = block_length(window.buf, p, self.order)  # now with its trailing length
            if not length:  # damage before the range: skipped as a whole read skips it (F5)
                framing, _ = block_length(window.buf, p, self.order, content=False)
                if framing and len(window.buf) - p >= framing:
                    p += framing
                    continue
                if self._find(window.base + p + 1) < 0:
                    self.earlier_packets = True  # (not known past damage there: assume so)
                    break
                p = 0  # the window starts at the next block
                continue
            if len(window.buf) - p < length:
                break
            block_type = struct.unpack_from(order + "I", window.buf, p)[0]
            if block_type in (EPB, SPB, PB):
                self.earlier_packets = True
                break
            if block_type == SHB:
                self.order, self.interfaces = order, []
            elif block_type == IDB:
                self.interfaces.append(parse_interface(window.buf, p, length, order))
            p += length
        self.info.snaplen = max((i.snaplen for i in self.interfaces), default=None)
        window.seek(boundary)
        return boundary

    # -- the hot loop ----------------------------------------------------------------------------

    def records(self) -> Iterator[tuple]:
        info, window, offsets = self.info, self.window, self.offsets
        index = records_bytes = 0
        first_ts = ts = None
        timed = False  # a packet with a time of its own was read
        p = self.start - window.base
        try:
            while True:  # one pass per stretch between two slow-path events
                order = self.order
                header = struct.Struct(order + "II").unpack_from
                trailer = struct.Struct(order + "I").unpack_from
                epb = struct.Struct(order + "IIII").unpack_from  # interface, ts high, ts low, caplen
                interfaces = self.interfaces
                current = -1  # the interface of the last packet, whose parameters are in locals
                link_type = multiplier = divisor = offset_ns = 0
                buf = window.buf
                n = len(buf)
                stop_at = self.end - window.base
                while True:
                    if n - p < BLOCK_HEADER:
                        window.extend(p, BLOCK_HEADER)
                        buf, p = window.buf, 0
                        n, stop_at = len(buf), self.end - window.base
                        if n < BLOCK_HEADER:
                            break
                    if p >= stop_at:  # past the end of the range: stop at the first boundary
                        at = window.base + p
                        if self._stops_at(at):
                            self.stopped = at
                            return
                        buf, n = window.buf, len(window.buf)  # the check read on
                        p, stop_at = at - window.base, self.end - window.base
                    block_type, length = header(buf, p)
                    if block_type != EPB or length & 3 or not 32 <= length <= MAX_BLOCK:
                        break
                    end = p + length
                    if end > n:
                        window.extend(p, length)
                        buf, p = window.buf, 0
                        n, stop_at, end = len(buf), self.end - window.base, length
                        if end > n:
                            break
                    if trailer(buf, end - 4)[0] != length:
                        break
                    interface, high, low, caplen = epb(buf, p + 8)
                    if caplen > length - 32:
                        break
                    if interface != current:
                        if interface >= len(interfaces):
                            break
                        current = interface
                        params = interfaces[interface]
                        link_type, multiplier, divisor, offset_ns = (params.link_type, params.multiplier,
                                                                     params.divisor, params.offset_ns)
                        self._use(interface)
                    stamp = ((high << 32) | low) * multiplier // divisor + offset_ns
                    if not TS_MIN_NS <= stamp <= TS_MAX_NS:
                        break  # a time no nanosecond clock holds: the slow path reports it
                    ts = stamp
                    timed = True
                    if first_ts is None:
                        first_ts = ts
                    index += 1
                    records_bytes += caplen
                    if offsets:
                        yield ts, link_type, buf[p + EPB_HEADER:p + EPB_HEADER + caplen], \
                            window.origin + window.base + p + EPB_HEADER
                    else:
                        yield ts, link_type, buf[p + EPB_HEADER:p + EPB_HEADER + caplen]
                    p = end

                # -- slow path: every other block, the end of the file, damage ----------------------
                at = window.base + p
                self.untimed = False
                record, resume = self._block(p, index, 0 if ts is None else ts)
                if record is not None and self.untimed and not timed and self.earlier_packets:
                    self._issue(INCONSISTENT_RANGES, f"the packet block at offset {at} has no time of its own "
                                f"and is the first packet of the range starting at {self.start}: a whole read "
                                "gives it the previous packet's time, which the range does not know (read this "
                                "file whole)", index, 0, at, at)
                if record is not None:
                    timed = timed or not self.untimed
                    ts = record[0]
                    if first_ts is None:
                        first_ts = ts
                    index += 1
                    records_bytes += len(record[2])
                    yield record
                if resume < 0:
                    self.stopped = self._end_of_file()
                    return
                p = resume - window.base
        finally:
            info.records += index
            info.bytes += records_bytes
            if first_ts is not None:
                info.first_ts_ns = first_ts
                info.last_ts_ns = ts
            info.end_offset = getattr(self, "stopped", None)
            info.end_header = self.state
            if self.on_close is not None:
                self.on_close()

    def _use(self, interface: int) -> None:
        if interface not in self.used:
            self.used.add(interface)
            self.info.link_types.add(self.interfaces[interface].link_type)
            self.info.resolutions.add(self.interfaces[interface].resolution)

    # -- the slow path ---------------------------------------------------------------------------

    def _block(self, p: int, index: int, last_ts: int) -> tuple[tuple | None, int]:
        """The block at window.buf[p] that the hot loop left: (the packet it holds or None, the
        absolute offset to go on from, or -1 at the end of the file)."""
        window = self.window
        at = window.base + p
        if len(window.buf) - p < BLOCK_HEADER + 4:
            window.extend(p, BLOCK_HEADER + 4)
            p = 0
        buf = window.buf
        if len(buf) - p < BLOCK_HEADER:  # the end of the file
            self._stream_issues(index)
            if len(buf) > p:
                self._issue(TRUNCATED_FILE, f"{len(buf) - p} bytes at the end do not form a complete block "
                            "(a capture cut while being written?)", index, len(buf) - p, at, at + len(buf) - p)
            return None, -1
        length, order = block_length(buf, p, self.order)
        if length and len(buf) - p < length:
            window.extend(p, length)
            buf, p = window.buf, 0
            length, order = block_length(buf, p, self.order)
        if not length:
            framing, _ = block_length(buf, p, self.order, content=False)
            inner = 0
            if framing and len(buf) - p >= framing:  # its lengths agree, but not with its content
                inner = self._inner_boundary(p, framing)
                if not inner:
                    self._issue(DAMAGED_BLOCK, f"the block at offset {at} cannot be read (a packet longer "
                                f"than the block, or a block too short for its type): its {framing} bytes are "
                                "skipped", index, framing, at, at + framing)
                    return None, at + framing
            # Garbage: up to a block inside what it claimed (a copied header whose length happened to
            # agree with bytes further on), else to the next block found
            resume = at + inner if inner else self._find(at + 1)
            end = resume if resume >= 0 else self._end_of_file()
            self._issue(GARBAGE_BETWEEN_BLOCKS, f"no valid block at offset {at}: {end - at} bytes skipped to "
                        + (f"the next block at {end}" if resume >= 0 else "the end of the file"),
                        index, end - at, at, end)
            if resume < 0:
                self._stream_issues(index)
            return None, resume
        block_type = struct.unpack_from(order + "I", buf, p)[0]
        if len(buf) - p < length:
            return self._cut(p, block_type, index, last_ts)
        resume = at + length
        if block_type == SHB:
            if at:
                self._issue(CONCATENATED_CAPTURE, f"a new section header at offset {at}: another capture "
                            "appended to this one; reading goes on with its parameters", index, 0, at, resume)
            self.order, self.interfaces, self.used, self.in_range = order, [], set(), None
            self.drops = {}
        elif block_type == ISB:
            self._statistics(buf, p, length, order)
        elif block_type == IDB:
            interface = parse_interface(buf, p, length, order)
            if self.in_range is not None:
                # its number follows those of the section's interfaces described before the range
                # start, which the range must know first (F15: packets read with the wrong
                # interface's link type)
                self._catch_up()
                self.in_range.append(interface)
            self.interfaces.append(interface)
            if interface.snaplen and (self.info.snaplen or 0) < interface.snaplen:
                self.info.snaplen = interface.snaplen
        elif block_type in (EPB, PB, SPB):
            return self._packet(buf, p, block_type, length, index, last_ts), resume
        return None, resume

    def _statistics(self, buf: bytes, p: int, length: int, order: str) -> None:
        """An Interface Statistics Block: the packets its interface dropped so far, into
        info.dropped (counters are cumulative: only what grew since the last one counts)."""
        interface = struct.unpack_from(order + "I", buf, p + 8)[0]
        at, end, dropped = p + 20, p + length - 4, None
        while at + 4 <= end:
            code, size = struct.unpack_from(order + "HH", buf, at)
            if code == 0:
                break
            if code in DROP_OPTIONS and size == 8 and at + 12 <= end:
                dropped = (dropped or 0) + struct.unpack_from(order + "Q", buf, at + 4)[0]
            at += 4 + ((size + 3) & ~3)
        if dropped is None:
            return
        before = self.drops.get(interface, 0)
        if dropped > before:
            self.drops[interface] = dropped
            self.info.dropped = (self.info.dropped or 0) + dropped - before
        elif self.info.dropped is None:
            self.info.dropped = 0

    def _packet(self, buf: bytes, p: int, block_type: int, length: int, index: int, last_ts: int) -> tuple | None:
        at = self.window.base + p
        if block_type == SPB:
            # no interface field (the first one) and no timestamp: it gets the previous packet's
            # time, so a merge by time keeps it in place (Scapy gives None)
            interface, origlen = 0, struct.unpack_from(self.order + "I", buf, p + 8)[0]
            data_at, high_low = p + 12, None
        elif block_type == EPB:
            interface, high, low, caplen = struct.unpack_from(self.order + "IIII", buf, p + 8)
            data_at, high_low = p + EPB_HEADER, (high, low)
        else:  # the obsolete Packet Block
            interface, _, high, low, caplen = struct.unpack_from(self.order + "HHIII", buf, p + 8)
            data_at, high_low = p + EPB_HEADER, (high, low)
        if interface >= len(self.interfaces) and not (self._catch_up() and interface < len(self.interfaces)):
            self._issue(UNKNOWN_INTERFACE, f"the packet block at offset {at} names interface {interface}, which "
                        f"no interface description block before it describes ({len(self.interfaces)} do): "
                        "skipped", index, length, at, at + length)
            return None
        params = self.interfaces[interface]
        self._use(interface)
        if block_type == SPB:
            caplen = min(origlen, params.snaplen or origlen, length - 16)
            self.untimed = True
            return last_ts, params.link_type, buf[data_at:data_at + caplen]
        ts = self._time(params, *high_low, index, length, at, last_ts)
        return ts, params.link_type, buf[data_at:data_at + caplen]

    def _time(self, params: Interface, high: int, low: int, index: int, length: int, at: int,
              last_ts: int) -> int:
        """A packet's time in nanoseconds; one beyond what 64 bits hold (a damaged timestamp, or
        its interface's resolution or offset) is reported, and the packet, whose bytes may well be
        right, kept with the previous packet's time (as a Simple Packet Block, which has none)."""
        ts = ((high << 32) | low) * params.multiplier // params.divisor + params.offset_ns
        if TS_MIN_NS <= ts <= TS_MAX_NS:
            return ts
        self._issue(UNREADABLE_TIME, f"the packet block at offset {at} has a time of {ts} ns since 1970 "
                    f"(timestamp {(high << 32) | low} at {params.resolution} ticks/s, offset {params.offset_s} s), "
                    "beyond 1677-2262: kept with the previous packet's time", index, 0, at, at + length)
        self.untimed = True
        return last_ts

    def _cut(self, p: int, block_type: int, index: int, last_ts: int) -> tuple[tuple | None, int]:
        """A plausible block cut by the end of the file: a truncated last packet, or damage (a
        chain of blocks starts inside it)."""
        window = self.window
        buf = window.buf
        at = window.base + p
        status, i = find_pcapng_boundary(buf, p + 1, True, self.order)
        if status == FOUND:
            resume = window.base + i
            self._issue(GARBAGE_BETWEEN_BLOCKS, f"the block at offset {at} claims to run past the end of the "
                        f"file, but blocks follow inside it: {resume - at} bytes skipped", index,
                        resume - at, at, resume)
            return None, resume
        self._stream_issues(index)
        left = len(buf) - p
        if block_type in (EPB, PB) and left >= EPB_HEADER:
            if block_type == EPB:
                interface, high, low, caplen = struct.unpack_from(self.order + "IIII", buf, p + 8)
            else:
                interface, _, high, low, caplen = struct.unpack_from(self.order + "HHIII", buf, p + 8)
            if interface < len(self.interfaces) or self._catch_up() and interface < len(self.interfaces):
                params = self.interfaces[interface]
                self._use(interface)
                data = buf[p + EPB_HEADER:p + EPB_HEADER + caplen]
                if len(data) < caplen:
                    self._issue(TRUNCATED_RECORD, f"the last packet holds {len(data)} of its {caplen} bytes (a "
                                "capture cut while being written?)", index, 0, at, at + left)
                else:  # cut after the packet, in its options or length
                    self._issue(TRUNCATED_FILE, f"the last block is cut short after its packet ({left} of its "
                                "bytes are there)", index, 0, at, at + left)
                ts = self._time(params, high, low, index, left, at, last_ts)
                return (ts, params.link_type, data), -1
        self._issue(TRUNCATED_FILE, f"{left} bytes at the end do not form a complete block (a capture cut "
                    "while being written?)", index, left, at, at + left)
        return None, -1

    def _catch_up(self) -> bool:
        """A range met a packet of an interface described before its start but after the blocks it
        read from the file's start: read the file up to the range start for the interfaces in
        force there (slow, but only files that describe interfaces mid-way need it)."""
        if self.caught_up or self.in_range is None:
            return False
        self.caught_up = True
        stream = self.window.stream
        resume_at = stream.tell()
        stream.seek(self.window.origin)
        window = Window(stream)
        before = PcapngReader(window, CaptureInfo(self.info.path, self.info.size), 0, self.start,
                              order=self.range_order)
        for _ in before.records():
            pass
        stream.seek(resume_at)
        if before.order != self.order:
            return False
        self.interfaces = before.interfaces + self.in_range
        if not self.used:  # (packets already read used what the range knew at its start: that stays
            self.info.start_header = before.state  # its start header, for CaptureInfo.merge to judge)
        self.used = set()
        return True

    def _stops_at(self, at: int) -> bool:
        """Whether a range ends at offset `at` (in the window): the first accepted boundary at or
        after its end. The window may read on, keeping from `at`."""
        window = self.window
        p = at - window.base
        while True:
            verdict = pcapng_chain(window.buf, p, window.eof, self.range_order)
            if verdict != MORE:
                return verdict == ACCEPTED
            window.extend(p, len(window.buf) - p + LOOKAHEAD)
            p = 0

    def _inner_boundary(self, p: int, framing: int) -> int:
        """How far into the `framing` bytes of the unreadable block at window.buf[p] an accepted block
        boundary lies (past its first byte), or 0 if none does: then its lengths agreed by chance.
        The window keeps the block's start."""
        o = p + 1
        while True:
            window = self.window
            status, i = find_pcapng_boundary(window.buf, o, window.eof, self.order)
            if i >= p + framing or status not in (FOUND, MORE):
                return 0
            if status == FOUND:
                return i - p
            if window.eof:  # (a search that cannot read on has decided: never so, but never a loop)
                return 0
            window.extend(p, len(window.buf) - p + LOOKAHEAD)  # a candidate to confirm past the window
            o, p = i - p, 0

    def _find(self, at: int) -> int:
        """The first accepted boundary at or after offset `at` (still in the window), or -1 if there
        is none up to the end of the file. The window then starts there."""
        window = self.window
        p = at - window.base
        while True:
            status, i = find_pcapng_boundary(window.buf, p, window.eof, self.order)
            if status == MORE:
                window.extend(i, len(window.buf) - i + LOOKAHEAD)
                p = 0
            elif status == FOUND:
                window.extend(i, 0)
                return window.base
            else:
                return -1

    def _end_of_file(self) -> int:
        window = self.window
        while not window.eof:
            window.extend(len(window.buf), CHUNK)
        return window.base + len(window.buf)

    def _issue(self, kind: str, detail: str, index: int, skipped: int, at: int, end: int) -> None:
        self.info.issues.append(CaptureIssue(kind, detail, index, skipped, at, end))

    def _stream_issues(self, index: int) -> None:
        stream = self.window.stream
        issues = getattr(stream, "issues", None)
        if issues:
            for issue in issues:
                issue.record = index
                self.info.issues.append(issue)
            stream.issues = []
