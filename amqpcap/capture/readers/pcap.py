"""Classic pcap records: a global header, then per record a 16-byte header (seconds, micro- or
nanoseconds, caplen, origlen) and caplen bytes.

The loop slices records out of large reads and checks every header it meets. A record is handed
out only once the header after it is plausible too (or the file ends right after it), because a
damaged caplen shows only at the next header: when that one is implausible, the reader finds the
next accepted boundary (boundaries.py), decides which record the damage hit, and reports it.
The run of sound records between two such events is one call of `scan_records` (a typed loop
when compiled), which the generator then hands out one by one.
"""

from __future__ import annotations

from typing import Iterator

from amqpcap.capture.readers.boundaries import (
    ACCEPTED,
    CHAIN,
    DAY,
    FOUND,
    LEARN_BYTES,
    MAX_CAPLEN,
    MAX_ORIGLEN,
    MORE,
    PCAP_HEADER,
    PCAP_RECORD,
    PcapRules,
    find_pcap_boundary,
    is_pcap_header,
    pcap_chain,
    pcap_rules,
)
from amqpcap.capture.readers.info import (
    CONCATENATED_CAPTURE,
    DAMAGED_RECORD_HEADER,
    TRUNCATED_FILE,
    TRUNCATED_RECORD,
    CaptureInfo,
    CaptureIssue,
)
from amqpcap.capture.readers.source import CHUNK, Window

NO_END = 1 << 62  # the end of a whole read: past any file
LOOKAHEAD = CHAIN * (MAX_CAPLEN + PCAP_RECORD) + CHUNK  # bytes a boundary search reads on at once
COMPILED = __file__.endswith((".so", ".pyd"))

# why scan_records stopped
NEEDS_BYTES = 0  # the next record header is not wholly in the bytes
IMPLAUSIBLE = 1  # the next record header is not plausible: the slow path judges it
PLAUSIBLE = 2  # the next header is plausible, but its record is at or past the range's end, or past the bytes


class PcapReader:
    """Records of one pcap file, or of the byte range [start, end) of it (see read_records)."""

    def __init__(self, window: Window, info: CaptureInfo, rules: PcapRules, start: int = 0,
                 end: int | None = None, on_close=None, offsets: bool = False) -> None:
        """`offsets`: records say where their bytes lie in the file (read_records)."""
        self.window = window
        self.offsets = offsets
        self.info = info
        self.rules = rules
        self.range_rules = rules  # a range's ends are judged by the file's first header, as its start
        self.end = NO_END if end is None else end
        self.on_close = on_close
        self.start = self._first_boundary(start)
        info.start_offset = self.start
        info.start_header = rules.state
        info.snaplen = rules.snaplen
        info.link_types.add(rules.link_type)
        info.resolutions.add(10**9 if rules.nano else 10**6)

    def _first_boundary(self, start: int) -> int:
        """B(start): the first record at or after `start` (the one after the header for 0)."""
        if start <= 0:
            return PCAP_HEADER
        self.window.seek(max(start, PCAP_HEADER))
        found = self._find(self.window.base)
        return found if found >= 0 else self._end_of_file()

    # -- the hot loop ----------------------------------------------------------------------------

    def records(self) -> Iterator[tuple[int, int, bytes]]:
        info, window = self.info, self.window
        index = 0  # records handed out
        records_bytes = 0  # their bytes, added up per stretch from offsets (cheaper than per record)
        first_ts = None
        last = None  # the last record handed out
        pending = None  # the last record read: handed out once the header after it is plausible
        stretch_at = None  # offset of the first record of the stretch being read, None between stretches
        handing = None  # a batch being handed out record by record
        p = self.start - window.base
        try:
            while True:  # one pass per stretch of records between two slow-path events
                rules = self.rules
                unpack = rules.header.unpack_from
                link_type, scale = rules.link_type, rules.scale
                if len(window.buf) - p < PCAP_RECORD:
                    window.extend(p, PCAP_RECORD)
                    p = 0
                buf = window.buf
                n = len(buf)
                stop_at = self.end - window.base
                stretch_at, stretch_index, stretch_ts = window.base + p, index, None
                # the first record of a stretch has no neighbour to compare its time with
                last_sec = unpack(buf, p)[0] if n - p >= PCAP_RECORD else 0
                stopped = cut = False
                last_header = n - 16  # (16: PCAP_RECORD)
                batch: list = []
                while True:
                    # the records whose headers are plausible and whose bytes are in buf, in one call
                    why, p, last_sec = scan_records(buf, p, stop_at, last_sec, rules, batch,
                                                    window.origin + window.base if self.offsets else -1)
                    if batch:  # each but the last is followed by a plausible header: handed out
                        if pending is not None:
                            index += 1
                            last = pending
                            yield pending
                        elif stretch_ts is None:
                            stretch_ts = batch[0][0]
                        pending = batch.pop()
                        if batch:
                            handing = batch  # (for `finally`: where handing out stopped, found from `last`)
                            for last in batch:
                                yield last
                            index += len(batch)
                            handing = None
                            batch = []
                    if why == NEEDS_BYTES:
                        keep = p - 16 - len(pending[2]) if pending is not None else p
                        window.extend(keep, p - keep + 16)
                        buf, p, n = window.buf, p - keep, len(window.buf)
                        stop_at, last_header = self.end - window.base, n - 16
                        if p > last_header:
                            break
                        continue
                    sec, sub, caplen, origlen = unpack(buf, p)
                    if why == IMPLAUSIBLE:
                        break
                    # a plausible header at or past the range's end, or whose record runs past buf
                    if pending is not None:
                        index += 1
                        last = pending
                        yield pending
                        pending = None
                    elif stretch_ts is None:
                        stretch_ts = sec * 1_000_000_000 + sub * scale
                    if p >= stop_at:  # past the end of the range: stop at the first boundary
                        at = window.base + p
                        stopped = self._stops_at(at)
                        buf, n = window.buf, len(window.buf)  # the check may have read on
                        p, stop_at, last_header = at - window.base, self.end - window.base, n - 16
                        if stopped:
                            break
                    end = p + 16 + caplen
                    if end > n:
                        window.extend(p, 16 + caplen)
                        buf, p, n = window.buf, 0, len(window.buf)
                        stop_at, last_header, end = self.end - window.base, n - 16, 16 + caplen
                        if end > n:
                            cut = True
                            break
                    pending = (sec * 1_000_000_000 + sub * scale, link_type, buf[p + 16:end])
                    if self.offsets:
                        pending = (*pending, window.origin + window.base + p + 16)
                    last_sec = sec
                    p = end

                # -- slow path: the end of the file or range, a record cut by it, a new header, damage
                buf = window.buf
                n = len(buf)
                at = window.base + p
                pending_at = at - PCAP_RECORD - len(pending[2]) if pending is not None else at
                records_bytes += pending_at - stretch_at - PCAP_RECORD * (index - stretch_index)
                if first_ts is None and index > stretch_index:
                    first_ts = stretch_ts
                stretch_at = None
                if stopped:
                    self.stopped = at
                    return
                if n - p < PCAP_RECORD:  # the end of the file
                    if pending is not None:
                        index, records_bytes, first_ts, last = _count(index, records_bytes, first_ts, pending)
                        yield pending
                        pending = None
                    self._stream_issues(index)
                    if n > p:
                        info.issues.append(CaptureIssue(
                            TRUNCATED_FILE, f"{n - p} bytes at the end do not form a complete record "
                            "(a capture cut while being written?)", index, n - p, at, at + n - p))
                    self.stopped = at + n - p
                    return
                if cut:  # the header is plausible: a truncated last record, or its caplen is damaged
                    resume = self._inside(p + 1)
                    if resume < 0:
                        self._stream_issues(index)
                        record = (sec * 1_000_000_000 + sub * scale, link_type, buf[p + PCAP_RECORD:])
                        info.issues.append(CaptureIssue(
                            TRUNCATED_RECORD, f"the last record holds {n - p - PCAP_RECORD} of its {caplen} "
                            "bytes (a capture cut while being written?)", index, 0, at, at + n - p))
                        self.stopped = at + n - p
                        index, records_bytes, first_ts, last = _count(index, records_bytes, first_ts, record)
                        yield record
                        return
                    self._damaged(at, resume, index, f"a record claims {caplen} bytes, past the end of "
                                  "the file, but records follow inside them")
                    p = resume - window.base
                    continue
                new_rules = self._next_header(at, pending_at)
                if new_rules is not None:  # a concatenated capture: go on with its header
                    if pending is not None:
                        index, records_bytes, first_ts, last = _count(index, records_bytes, first_ts, pending)
                        yield pending
                        pending = None
                    info.issues.append(CaptureIssue(
                        CONCATENATED_CAPTURE, f"a new pcap global header ({_describe(new_rules)}) at offset "
                        f"{at}: another capture appended to this one; reading goes on with its parameters",
                        index, 0, at, at + PCAP_HEADER))
                    self.rules = new_rules
                    info.link_types.add(new_rules.link_type)
                    info.resolutions.add(10**9 if new_rules.nano else 10**6)
                    p = at + PCAP_HEADER - window.base
                    continue
                if pending is None:
                    resume = self._find(at + 1)
                    self._damaged(at, resume, index, _why(rules, sec, sub, caplen, origlen, last_sec))
                else:
                    caplen_before, origlen_before = self._lengths_at(pending_at)
                    resume = self._find(pending_at + 1)  # the header itself may be garbage before a record
                    if resume == at:  # only the time jumped, and records follow: a quiet capture
                        pass
                    elif 0 <= resume < at or (caplen_before < origlen_before
                                              and resume == pending_at + PCAP_RECORD + origlen_before):
                        # the record before overlaps the next record found (or its origlen points
                        # there): its caplen is what is damaged, so it is dropped
                        self._damaged(pending_at, resume, index,
                                      f"a record claims {caplen_before} bytes, which do not end at a "
                                      "record")
                        pending = None
                    else:
                        self._damaged(at, resume, index + 1, _why(rules, sec, sub, caplen, origlen, last_sec))
                    if pending is not None:
                        index, records_bytes, first_ts, last = _count(index, records_bytes, first_ts, pending)
                        yield pending
                        pending = None
                if resume < 0:
                    self._stream_issues(index)
                    self.stopped = self._end_of_file()
                    return
                p = resume - window.base
        finally:
            if stretch_at is not None:  # closed (or failed) in the middle of a stretch
                at = window.base + p
                handed_end = at - PCAP_RECORD - len(pending[2]) if pending is not None and pending is not last \
                    else at
                if handing is not None:  # closed while handing out a batch: the records after `last` were not
                    rest = handing[next(k for k, record in enumerate(handing) if record is last) + 1:]
                    index += len(handing) - len(rest)
                    handed_end -= sum(PCAP_RECORD + len(record[2]) for record in rest)
                records_bytes += handed_end - stretch_at - PCAP_RECORD * (index - stretch_index)
                if first_ts is None and index > stretch_index:
                    first_ts = stretch_ts
            info.records += index
            info.bytes += records_bytes
            if first_ts is not None:
                info.first_ts_ns = first_ts
                info.last_ts_ns = last[0]
            info.end_offset = getattr(self, "stopped", None)
            info.end_header = self.rules.state
            if self.on_close is not None:
                self.on_close()

    # -- slow-path helpers (absolute offsets) ----------------------------------------------------

    def _lengths_at(self, at: int) -> tuple[int, int]:
        """(caplen, origlen) of the record header at offset `at` (still in the window)."""
        _, _, caplen, origlen = self.rules.header.unpack_from(self.window.buf, at - self.window.base)
        return caplen, origlen

    def _stops_at(self, at: int) -> bool:
        """Whether a range ends at offset `at` (in the window): the first accepted boundary at or
        after its end. The window may read on, keeping from `at`."""
        window = self.window
        p = at - window.base
        while True:
            verdict = pcap_chain(window.buf, p, window.eof, self.range_rules)
            if verdict != MORE:
                return verdict == ACCEPTED
            window.extend(p, len(window.buf) - p + LOOKAHEAD)
            p = 0

    def _find(self, at: int) -> int:
        """The first accepted boundary at or after offset `at` (still in the window), or -1 if there
        is none up to the end of the file. The window then starts there."""
        window = self.window
        p = at - window.base
        while True:
            status, i = find_pcap_boundary(window.buf, p, window.eof, self.rules)
            if status == MORE:
                window.extend(i, len(window.buf) - i + LOOKAHEAD)
                p = 0
            elif status == FOUND:
                window.extend(i, 0)
                return window.base
            else:
                return -1

    def _inside(self, p: int) -> int:
        """A record cut by the end of the file: the accepted boundary inside it (its caplen is
        damaged), or -1 (a truncated last record). The window holds everything to the end."""
        window = self.window
        status, i = find_pcap_boundary(window.buf, p, True, self.rules)
        return window.base + i if status == FOUND else -1

    def _next_header(self, at: int, keep: int) -> PcapRules | None:
        """The rules of a pcap global header at offset `at`, if one is there."""
        window = self.window
        if len(window.buf) - (at - window.base) < PCAP_HEADER and not window.eof:
            window.extend(keep - window.base, at - keep + PCAP_HEADER + PCAP_RECORD)
        p = at - window.base
        if not is_pcap_header(window.buf, p):
            return None
        rules = pcap_rules(window.buf, p)
        if rules is not None:
            if len(window.buf) - p < PCAP_HEADER + LEARN_BYTES and not window.eof:
                window.extend(keep - window.base, at - keep + PCAP_HEADER + LEARN_BYTES)
            rules.learn_origlen(window.buf, at - window.base + PCAP_HEADER)
        return rules

    def _damaged(self, at: int, resume: int, index: int, why: str) -> None:
        end = resume if resume >= 0 else self._end_of_file()
        self.info.issues.append(CaptureIssue(
            DAMAGED_RECORD_HEADER, f"{why}; {end - at} bytes skipped from offset {at} to "
            + (f"the next record at {end}" if resume >= 0 else "the end of the file"),
            index, end - at, at, end))

    def _end_of_file(self) -> int:
        window = self.window
        while not window.eof:
            window.extend(len(window.buf), CHUNK)
        return window.base + len(window.buf)

    def _stream_issues(self, index: int) -> None:
        """Damage the gzip layer met: it ended the stream, so it comes before what that caused."""
        stream = self.window.stream
        for issue in getattr(stream, "issues", ()):
            issue.record = index
            self.info.issues.append(issue)
        if getattr(stream, "issues", None):
            stream.issues = []


def scan_records(buf: bytes, p: int, stop_at: int, last_sec: int, rules: PcapRules, out: list,
                 at: int = -1) -> tuple:
    """The hot loop of `PcapReader.records`: from offset `p` of `buf`, each record whose header is
    plausible, whose bytes are all in `buf` and which starts before `stop_at` is appended to `out` as
    (ts_ns, link type, bytes), or with `at` (the file offset of buf[0]) >= 0 as (ts_ns, link type,
    bytes, file offset of the bytes). Returns (why it stopped: NEEDS_BYTES, IMPLAUSIBLE or PLAUSIBLE, the
    offset of the header it stopped at, the seconds of the last record appended, else `last_sec`).
    Compiled, the header's fields are read octet by octet as C integers; interpreted, struct reads
    them (faster in Python)."""
    link_type, scale, sub_max, check_origlen = rules.link_type, rules.scale, rules.sub_max, rules.check_origlen
    little = rules.order == "<"
    unpack = rules.header.unpack_from
    max_caplen, max_origlen, day, header = MAX_CAPLEN, MAX_ORIGLEN, DAY, PCAP_RECORD
    n = len(buf)
    last_header = n - header
    while p <= last_header:
        if COMPILED:
            sec, sub = _u32(buf, p, little), _u32(buf, p + 4, little)
            caplen, origlen = _u32(buf, p + 8, little), _u32(buf, p + 12, little)
        else:
            sec, sub, caplen, origlen = unpack(buf, p)
        # ordered so that a sound record costs one comparison per term
        if (caplen > max_caplen or sub > sub_max
                or (sec != last_sec and not -day <= sec - last_sec <= day)
                or (origlen != caplen and (origlen > max_origlen or origlen < caplen and check_origlen))
                or (caplen == 0 and origlen == 0)):
            return IMPLAUSIBLE, p, last_sec
        end = p + header + caplen
        if p >= stop_at or end > n:
            return PLAUSIBLE, p, last_sec
        if COMPILED:  # (pcap.pxd's C functions: one copy, no slice object; end <= n above)
            record = PyBytes_FromStringAndSize(PyBytes_AS_STRING(buf) + p + header, end - p - header)  # noqa: F821
        else:
            record = buf[p + header:end]
        if at < 0:
            out.append((sec * 1_000_000_000 + sub * scale, link_type, record))
        else:
            out.append((sec * 1_000_000_000 + sub * scale, link_type, record, at + p + header))
        last_sec = sec
        p = end
    return NEEDS_BYTES, p, last_sec


def _u32(buf: bytes, i: int, little: bool) -> int:
    """The unsigned 32-bit integer at `i` (compiled: inlined, four C loads and shifts)."""
    if little:
        first = buf[i + 3]  # (compiled: 64-bit, so that << 24 cannot overflow)
        return (first << 24) | (buf[i + 2] << 16) | (buf[i + 1] << 8) | buf[i]
    first = buf[i]
    return (first << 24) | (buf[i + 1] << 16) | (buf[i + 2] << 8) | buf[i + 3]


def _count(index: int, records_bytes: int, first_ts: int | None, record: tuple) -> tuple:
    """The counters after handing out one more record (outside the hot loop)."""
    return index + 1, records_bytes + len(record[2]), first_ts if first_ts is not None else record[0], record


def _why(rules: PcapRules, sec: int, sub: int, caplen: int, origlen: int, last_sec: int | None) -> str:
    if caplen > MAX_CAPLEN:
        return f"a record header claims {caplen} captured bytes (at most {MAX_CAPLEN})"
    if origlen > MAX_ORIGLEN or (origlen < caplen and rules.check_origlen) or origlen == caplen == 0:
        return f"a record header claims {caplen} captured of {origlen} original bytes"
    if sub > rules.sub_max:
        return f"a record header's sub-second field is {sub}"
    return (f"a record's time jumps {sec - last_sec} s from the record before, and the records after it "
            "do not confirm it")


def _describe(rules: PcapRules) -> str:
    order = "little-endian" if rules.order == "<" else "big-endian"
    return f"{order}, {'ns' if rules.nano else 'us'}, link type {rules.link_type}"
