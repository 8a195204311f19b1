"""A capture range's TCP segments, sorted into buckets of connections: the read stage's whole
per-packet work, in one compiled loop.

Each record's link/IP/TCP headers are parsed, the packet gets its local TCP stream
(amqp_decode.stream_index) and goes, as a row of SEGMENT_COLUMNS, to the bucket of its connection:
a stable hash of the 4-tuple, the same from either direction, in every process and run, so that
one decode task later finds all of a connection's segments, from every file of the night, in its
bucket and nothing else.

    sorter = SegmentBuckets(buckets, parts)  # parts: amqp_decode.columns.PartColumns(SEGMENT_COLUMNS, ...),
                                            # each row's size its payload's
    sorter.read(records, report)  # records: (ts_ns, link type, bytes); report(bytes, packets) now and then
    sorter.spans  # {bucket: [earliest, latest] packet time}
"""

from __future__ import annotations

import zlib

from amqp_decode.columns import PartColumns
from amqp_decode.packets import PacketParser
from amqp_decode.stream_index import RangeStreams

# A segment's row; `record` is the packet's index in its range, `stream` its local TCP stream.
SEGMENT_COLUMNS = ("ts_ns", "record", "stream", "src", "sport", "dst", "dport", "seq", "ack", "flags", "payload")
REPORT_EVERY = 4096  # records between two progress reports
KEYS_HELD = 100_000  # 4-tuples whose bucket is remembered (one hash per connection, not per packet)
RECORD_HEADER = 16  # bytes a progress report counts per record beyond its data (a pcap record header)


def bucket_of(src: bytes, sport: int, dst: bytes, dport: int, buckets: int) -> int:
    """The connection's bucket: stable across processes and runs, and the same from either side."""
    a, b = src + sport.to_bytes(2, "big"), dst + dport.to_bytes(2, "big")
    return zlib.crc32(a + b if a <= b else b + a) % buckets


class SegmentBuckets:
    def __init__(self, buckets: int, parts: PartColumns) -> None:
        self.buckets = buckets
        self.parts = parts
        self.parser = PacketParser()
        self.streams = RangeStreams()
        self.keys: dict[tuple, int] = {}  # 4-tuple -> bucket
        self.spans: dict[int, list[int]] = {}  # bucket -> [earliest, latest] time (a file's may go back)
        self.records = 0  # records read so far (kept when reading fails part-way)

    def read(self, records, report=None) -> None:
        """Every record of `records`; `report(bytes, packets)` every REPORT_EVERY records and once
        at the end, also when reading fails part-way (what was read is counted)."""
        parser, streams, parts, keys, spans = self.parser, self.streams, self.parts, self.keys, self.spans
        count = self.records
        read = 0
        try:
            for ts_ns, link_type, data in records:
                count += 1
                self.records = count
                read += len(data) + RECORD_HEADER
                segment = parser.parse(ts_ns, link_type, data)
                if segment is not None:
                    stream = streams.segment(segment.src, segment.sport, segment.dst, segment.dport,
                                             segment.flags, segment.seq, ts_ns)
                    key = (segment.src, segment.sport, segment.dst, segment.dport)
                    known = keys.get(key)
                    if known is None:
                        if len(keys) >= KEYS_HELD:
                            keys.clear()
                        bucket = bucket_of(segment.src, segment.sport, segment.dst, segment.dport, self.buckets)
                        keys[key] = bucket
                    else:
                        bucket = known
                    span = spans.get(bucket)
                    if span is None:
                        spans[bucket] = [ts_ns, ts_ns]
                    elif ts_ns < span[0]:
                        span[0] = ts_ns
                    elif ts_ns > span[1]:
                        span[1] = ts_ns
                    parts.add(bucket, (ts_ns, count - 1, stream, segment.src, segment.sport, segment.dst,
                                       segment.dport, segment.seq, segment.ack, segment.flags, segment.payload),
                              len(segment.payload))
                if count % REPORT_EVERY == 0 and report is not None:
                    report(read, REPORT_EVERY)
                    read = 0
        finally:
            if report is not None:
                report(read, count % REPORT_EVERY)
