"""What reading a capture found: `CaptureInfo` per file (or byte range), `CaptureIssue` per damage,
`CaptureError` for a file that is no capture at all. The issue kinds are described in the
package docstring (amqpcap/capture/readers/__init__.py)."""

from __future__ import annotations

import msgspec
from msgspec import field

LINK_TYPE_NAMES = {0: "NULL", 1: "EN10MB", 12: "RAW", 101: "RAW", 108: "LOOP", 113: "LINUX_SLL",
                   228: "IPV4", 229: "IPV6", 276: "LINUX_SLL2"}

# Issue kinds (one word each, so tables can count them); see the package docstring.
TRUNCATED_RECORD = "truncated-record"
TRUNCATED_FILE = "truncated-file"
DAMAGED_RECORD_HEADER = "damaged-record-header"
GARBAGE_BETWEEN_BLOCKS = "garbage-between-blocks"
DAMAGED_BLOCK = "damaged-block"
UNKNOWN_INTERFACE = "unknown-interface"
GZIP_DAMAGED = "gzip-damaged"
CONCATENATED_CAPTURE = "concatenated-capture"
INCONSISTENT_RANGES = "inconsistent-ranges"
UNREADABLE_TIME = "unreadable-time"


class CaptureError(Exception):
    """A file that cannot be read as a capture at all."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


# msgspec Structs, not dataclasses: made in C at import, not by compiling their methods (amqpcap.protocol.spec)


class CaptureIssue(msgspec.Struct):
    kind: str
    detail: str  # in words, with the numbers
    record: int  # records read before it (in a range: before it within the range; merge() shifts)
    bytes_skipped: int
    offset: int | None = None  # file offset where the damage starts (gzip: in the decompressed stream)
    end_offset: int | None = None  # where reading resumed (or the file ended)
    # When it happened: the time of the record read right after it, else (at the file's end) of the
    # file's last record. Set by CaptureInfo.time_issues, whoever reads the records (the CLI's
    # decoder, the job's read tasks, the driver merging a file's ranges): one rule for all.
    ts_ns: int | None = None


class CaptureInfo(msgspec.Struct, dict=True):
    """What reading one file (or one byte range of it) found; filled in as records are read.

    Ranges of one file read apart merge into the whole file's info: start from an empty
    CaptureInfo(path, size) and `merge` each range's info in file order.
    """

    path: str
    size: int
    format: str = "unknown"  # "pcap", "pcap-ns", "pcapng"; "+gzip" appended when compressed
    link_types: set[int] = field(default_factory=set)
    resolutions: set[int] = field(default_factory=set)  # timestamp ticks per second (10**6, 10**9...)
    records: int = 0
    bytes: int = 0  # captured bytes of all records
    first_ts_ns: int | None = None
    last_ts_ns: int | None = None
    issues: list[CaptureIssue] = field(default_factory=list)
    snaplen: int | None = None  # pcap: the global header's; pcapng: the largest interface snaplen
    # pcapng: packets its interfaces' statistics say were dropped (isb_ifdrop + isb_osdrop; None:
    # no statistics with them, as in every classic pcap: tcpdump prints its drops, it does not write them)
    dropped: int | None = None
    start_offset: int | None = None  # offset of the first record boundary read (decompressed for gzip)
    end_offset: int | None = None  # where reading stopped: the next range's start_offset, or the end
    # The header parameters the reader assumed where it started and held where it stopped (byte
    # order, precision, link types...): a range started after a mid-file header change cannot know
    # it, so merge() compares them. Opaque tuples, only compared.
    start_header: tuple | None = None
    end_header: tuple | None = None

    @property
    def link_type_names(self) -> list[str]:
        return sorted(LINK_TYPE_NAMES.get(t, f"LINKTYPE_{t}") for t in self.link_types)

    @property
    def ok(self) -> bool:
        return not self.issues

    def damage(self) -> str | None:
        """The first damage in words and how much more there was: one line however damaged the
        file (None when it is not)."""
        if not self.issues:
            return None
        text = self.issues[0].detail
        more = len(self.issues) - 1
        if more:
            skipped = sum(issue.bytes_skipped for issue in self.issues)
            text += f" (and {more} more issue{'s' if more > 1 else ''}, {skipped} bytes skipped in all)"
        return text

    def time_issues(self, ts_ns: int | None, since: int = 0) -> int:
        """The issues found since `since` (their count when last asked) that have no time yet
        happened before the record of time `ts_ns`, the first read after them (or, given the
        file's last time once it is read whole, at its end). Returns the issues' count."""
        issues = self.issues
        for issue in issues[since:]:
            if issue.ts_ns is None:
                issue.ts_ns = ts_ns
        return len(issues)

    def merge(self, part: CaptureInfo) -> None:
        """Add the info of the byte range read right after what this info holds.

        Counts add up, the issues' record indices become whole-file indices, and a range that did
        not start where the previous one stopped, or started with other header parameters than
        the previous one ended with (a concatenated capture whose later header changed byte order,
        precision or link types: only a whole read sees it), adds an `inconsistent-ranges` issue.
        """
        if self.start_offset is None and not self.records and not self.issues:  # empty so far
            self.format = part.format
            self.start_offset, self.start_header = part.start_offset, part.start_header
        else:
            self._check_continuity(part)
        if part.snaplen is not None:
            self.snaplen = max(self.snaplen or 0, part.snaplen)
        if part.dropped is not None:  # (cumulative counters: the statistics at the file's end hold them all)
            self.dropped = max(self.dropped or 0, part.dropped)
        self.link_types |= part.link_types
        self.resolutions |= part.resolutions
        if part.records:  # damage at the end of the ranges before happened before this one's first record
            self.time_issues(part.first_ts_ns)
        self.issues += [msgspec.structs.replace(issue, record=issue.record + self.records) for issue in part.issues]
        if part.records:
            if not self.records:
                self.first_ts_ns = part.first_ts_ns
            self.last_ts_ns = part.last_ts_ns
        self.records += part.records
        self.bytes += part.bytes
        self.end_offset, self.end_header = part.end_offset, part.end_header

    def _check_continuity(self, part: CaptureInfo) -> None:
        read_nothing = part.start_offset == part.end_offset and not part.records and not part.issues
        if self.end_offset != part.start_offset:
            detail = (f"a range starts at offset {part.start_offset} but the previous one stopped at "
                      f"{self.end_offset}: records between them may be missing or doubled")
        elif not read_nothing and not _compatible(self.end_header, part.start_header):
            detail = (f"the range starting at offset {part.start_offset} was read with header parameters "
                      f"{part.start_header} but the file's header there is {self.end_header} (a "
                      "concatenated capture?): read this file whole")
        else:
            return
        self.issues.append(CaptureIssue(INCONSISTENT_RANGES, detail, self.records, 0,
                                        part.start_offset, part.start_offset))


def _compatible(before: tuple | None, after: tuple | None) -> bool:
    """Whether a range that started with `after` read what a whole read would have: the same
    parameters, or (pcapng) a prefix of the interfaces known there (a range learns interfaces
    described before it only when one of its packets names them)."""
    if before is None or after is None or before == after:
        return True
    if before[0] == after[0] == "pcapng" and before[1] == after[1]:  # ("pcapng", byte order, interfaces)
        return before[2][:len(after[2])] == after[2]
    return False
