"""A capture range's TCP segments, sorted into buckets of connections: the read stage's whole
per-packet work, in one compiled loop.

Each record's link/IP/TCP headers are parsed, the packet gets its local TCP stream
(amqpcap.capture.stream_index) and goes, as a row of SEGMENT_COLUMNS, to the bucket of its connection:
a stable hash of the 4-tuple, the same from either direction, in every process and run, so that
one decode task later finds all of a connection's segments, from every file of the night, in its
bucket and nothing else.

    sorter = SegmentBuckets(buckets, parts)  # parts: amqpcap.columnar.columns.PartColumns(SEGMENT_COLUMNS, ...,
                                            # buffer=HeldSegments), each row's size its payload's
    sorter.read(records, report)  # records: (ts_ns, link type, bytes[, file offset of the bytes]);
                                  # report(bytes, packets) now and then
    sorter.spans  # {bucket: [earliest, latest] packet time}

A bucket holds its segments as the parser made them (`HeldSegments`: one list append per packet)
and packs them into columns only when they are written (amqpcap.capture.packets.packed_columns): the
values go from each segment's C fields into arrays Arrow takes as they are. A row of Python values
per packet, converted by Arrow value by value, cost a third of the read stage.
"""

from __future__ import annotations

import zlib
from array import array

from amqpcap.capture.packets import PacketParser, packed_columns
from amqpcap.capture.stream_index import RangeStreams
from amqpcap.columnar.columns import ColumnBuffer, PartColumns

# A segment's row; `record` is the packet's index in its range, `stream` its local TCP stream.
# `at`, `size`: where the payload lies in the capture file (Segment.at; -1: it is in `payload`).
SEGMENT_COLUMNS = ("ts_ns", "record", "stream", "src", "sport", "dst", "dport", "seq", "ack", "flags", "payload",
                   "at", "size")
REPORT_EVERY = 4096  # records between two progress reports
RECORD_HEADER = 16  # bytes a progress report counts per record beyond its data (a pcap record header)
# C-typed twins of the two above, what the loop reads (compiled: C integers; bucketing.pxd)
_REPORT_EVERY, _RECORD_HEADER = REPORT_EVERY, RECORD_HEADER


def bucket_of(src: bytes, sport: int, dst: bytes, dport: int, buckets: int) -> int:
    """The connection's bucket: stable across processes and runs, and the same from either side."""
    a, b = src + sport.to_bytes(2, "big"), dst + dport.to_bytes(2, "big")
    return zlib.crc32(a + b if a <= b else b + a) % buckets


class HeldSegments(ColumnBuffer):
    """A bucket's buffer (PartColumns' `buffer`): its rows are the segments themselves, added as
    `(segment,)` with their `record` (index in the range) and `stream` (local) set, and taken as
    SEGMENT_COLUMNS packed (amqpcap.capture.packets.packed_columns)."""

    def __init__(self, names) -> None:
        if tuple(names) != SEGMENT_COLUMNS:
            raise ValueError(f"HeldSegments holds the columns {SEGMENT_COLUMNS}, not {tuple(names)}")
        self.names = SEGMENT_COLUMNS
        self.size = 0
        self.bytes = 0
        self.capacity = 0  # (a list that grows by itself)
        self.columns = []  # the segments

    def add(self, row: dict) -> None:
        raise TypeError("HeldSegments holds segments: add_values((segment,))")

    def add_values(self, values: tuple) -> None:
        self.columns.append(values[0])
        self.size += 1

    def take(self) -> list:
        segments = self.columns
        self.columns = []
        self.size = 0
        self.bytes = 0
        return packed_columns(segments)


class SegmentBuckets:
    def __init__(self, buckets: int, parts: PartColumns) -> None:
        if parts.buffer is not HeldSegments:
            raise ValueError("SegmentBuckets adds segments: its parts are PartColumns(..., buffer=HeldSegments)")
        self.buckets = buckets
        self.parts = parts
        self.parser = PacketParser()
        self.streams = RangeStreams()
        # each bucket's earliest and latest packet time (a file's may go back), where `seen`
        self.earliest = array("q", bytes(8 * buckets))
        self.latest = array("q", bytes(8 * buckets))
        self.seen = bytearray(buckets)
        self.records = 0  # records read so far (kept when reading fails part-way)

    @property
    def spans(self) -> dict:
        """{bucket: [earliest, latest] packet time} of the buckets given packets."""
        return {bucket: [self.earliest[bucket], self.latest[bucket]] for bucket in range(self.buckets)
                if self.seen[bucket]}

    def read(self, records, report=None, info=None) -> None:
        """Every record of `records`; `report(bytes, packets)` every REPORT_EVERY records and once
        at the end, also when reading fails part-way (what was read is counted). `info`: the
        CaptureInfo its reader fills in, whose damage each record read right after it times."""
        parser, streams, parts = self.parser, self.streams, self.parts
        earliest, latest, seen = self.earliest, self.latest, self.seen
        count = self.records
        read = 0
        issues = info.issues if info is not None else []
        timed = len(issues)
        try:
            for record in records:
                # a record read with offsets (amqpcap.capture.readers.read_records) says where its bytes
                # lie: its segment then stages that place rather than a copy of its payload
                ts_ns, link_type, data = record[0], record[1], record[2]
                if len(issues) != timed:  # the file was damaged just before this record
                    timed = info.time_issues(ts_ns, timed)
                count += 1
                self.records = count
                read += len(data) + _RECORD_HEADER
                segment = parser.parse(ts_ns, link_type, data, record[3] if len(record) > 3 else -1)
                if segment is not None:
                    stream = streams.segment(segment.src, segment.sport, segment.dst, segment.dport,
                                             segment.flags, segment.seq, ts_ns)
                    local = streams.last  # the packet's local stream: its bucket is hashed once
                    bucket = local.bucket
                    if bucket < 0:
                        bucket = local.bucket = bucket_of(segment.src, segment.sport, segment.dst, segment.dport,
                                                          self.buckets)
                    if not seen[bucket]:
                        seen[bucket] = 1
                        earliest[bucket] = latest[bucket] = ts_ns
                    elif ts_ns < earliest[bucket]:
                        earliest[bucket] = ts_ns
                    elif ts_ns > latest[bucket]:
                        latest[bucket] = ts_ns
                    segment.record = count - 1
                    segment.stream = stream
                    parts.add(bucket, (segment,), len(segment.payload))  # (the bytes held: none when placed)
                if count % _REPORT_EVERY == 0 and report is not None:
                    report(read, _REPORT_EVERY)
                    read = 0
        finally:
            if report is not None:
                report(read, count % _REPORT_EVERY)
