"""A capture range's segments sorted into connection buckets (amqpcap.capture.bucketing): every TCP
packet of every sample, in its connection's bucket, in capture order, with the row the packet
parser and the stream numbering give it one by one; what was read is reported even when reading
fails part-way. Run compiled and interpreted (the reference) alike."""

from __future__ import annotations

import pytest

from amqpcap.capture.bucketing import REPORT_EVERY, SEGMENT_COLUMNS, HeldSegments, SegmentBuckets, bucket_of
from amqpcap.capture.packets import PacketParser
from amqpcap.capture.readers import CaptureInfo, read_records
from amqpcap.capture.stream_index import RangeStreams
from amqpcap.columnar.columns import PartColumns
from tests.helpers.captures import ALL_SAMPLES, sample_id

BUCKETS = 3


def unpacked(columns: list) -> list[tuple]:
    """Packed columns (amqpcap.capture.packets.packed_columns) as rows of Python values, read by hand:
    an integer array's items, a bytes column's data cut at its offsets."""
    values = []
    for column in columns:
        if isinstance(column, tuple):
            offsets, data = column
            assert offsets[0] == 0 and len(data) == offsets[-1] and isinstance(data, bytes)
            values.append([data[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)])
        else:
            values.append(column.tolist())
    assert len({len(v) for v in values}) == 1
    return list(zip(*values))


def _sorted(path, flush_rows: int = 64, held_rows: int | None = None, offsets: bool = False):
    """{bucket: rows} as SegmentBuckets leaves them (written whenever a part is full), the sorter,
    and its progress reports."""
    out: dict[int, list[tuple]] = {}
    parts = PartColumns(SEGMENT_COLUMNS, lambda part: out.setdefault(part, []).extend(unpacked(parts.take(part))),
                        flush_rows, held_rows, buffer=HeldSegments)
    sorter, reports = SegmentBuckets(BUCKETS, parts), []
    sorter.read(read_records(str(path), CaptureInfo(str(path), path.stat().st_size), offsets=offsets),
                lambda read, packets: reports.append((read, packets)))
    for part in list(parts.buffers):
        out.setdefault(part, []).extend(unpacked(parts.take(part)))
    return out, sorter, reports


@pytest.mark.parametrize("offsets", [False, True], ids=["payloads", "placed"])
@pytest.mark.parametrize("path", ALL_SAMPLES, ids=sample_id)
def test_every_segment_is_in_its_connections_bucket_as_the_parser_reads_it(path, offsets):
    """Placed (records read with their offsets): a payload is staged as its place in the file
    (at, size) wherever it is one stretch of its record, and the file's bytes there are the payload."""
    parser, streams, want, spans = PacketParser(), RangeStreams(), {}, {}
    records = list(read_records(str(path), CaptureInfo(str(path), path.stat().st_size)))
    for index, (ts_ns, link_type, data) in enumerate(records):
        s = parser.parse(ts_ns, link_type, data)
        if s is None:
            continue
        stream = streams.segment(s.src, s.sport, s.dst, s.dport, s.flags, s.seq, ts_ns)
        bucket = bucket_of(s.src, s.sport, s.dst, s.dport, BUCKETS)
        want.setdefault(bucket, []).append((ts_ns, index, stream, s.src, s.sport, s.dst, s.dport, s.seq, s.ack,
                                            s.flags, s.payload, -1, len(s.payload)))
        span = spans.setdefault(bucket, [ts_ns, ts_ns])
        span[:] = [min(span[0], ts_ns), max(span[1], ts_ns)]
    got, sorter, reports = _sorted(path, offsets=offsets)
    if offsets:
        whole, placed = path.read_bytes(), 0
        for rows in got.values():
            for k, row in enumerate(rows):
                *fields, payload, at, size = row
                if at >= 0:
                    assert payload == b"" and size > 0
                    rows[k] = (*fields, whole[at:at + size], -1, size)
                    placed += 1
        # a compressed capture's bytes have no place in the file: its payloads are staged
        payloads = any(s for rows in want.values() for *_, s, _, _ in rows)
        assert placed == 0 if path.name.endswith(".gz") else placed > 0 or not payloads
    assert got == want and sum(map(len, got.values())) > 0
    assert sorter.spans == spans
    assert sorter.records == len(records) and sorter.streams.count == streams.count
    assert sorter.parser.skipped == parser.skipped
    assert sum(packets for _, packets in reports) == len(records)
    assert sum(read for read, _ in reports) == sum(len(data) + 16 for _, _, data in records)


def test_rows_are_the_same_whatever_the_buffers_and_budget():
    path = next(p for p in ALL_SAMPLES if p.name == "concurrent.pcap")
    assert _sorted(path, flush_rows=1)[0] == _sorted(path, flush_rows=10_000)[0] == \
        _sorted(path, flush_rows=50, held_rows=7)[0]


def test_what_was_read_before_a_failure_is_kept_and_reported():
    path = next(p for p in ALL_SAMPLES if p.name == "long_connection.pcap.gz")
    records = list(read_records(str(path), CaptureInfo(str(path), path.stat().st_size))) * 4  # packets again
    assert len(records) > REPORT_EVERY + 10  # a report comes mid-way, then the rest at the failure

    def failing():
        yield from records[:REPORT_EVERY + 10]
        raise OSError("the disk went away")
    kept: dict[int, int] = {}
    parts = PartColumns(SEGMENT_COLUMNS, lambda part: None, 1 << 30, buffer=HeldSegments)
    sorter, reports = SegmentBuckets(BUCKETS, parts), []
    with pytest.raises(OSError):
        sorter.read(failing(), lambda read, packets: reports.append(packets))
    for part in parts.buffers:
        kept[part] = parts.rows(part)
    assert sorter.records == REPORT_EVERY + 10 and reports == [REPORT_EVERY, 10]
    assert sum(kept.values()) == parts.held > 0


def test_a_budget_across_parts_hands_on_the_biggest_part():
    """PartColumns: a part is handed on when it is full; when the parts together hold the budget of
    rows, the part holding the most."""
    handed: list[tuple[int, int]] = []
    parts = PartColumns(("n",), lambda part: handed.append((part, len(parts.take(part)[0]))), 4, held_rows=6)
    for n in range(3):
        parts.add(0, (n,))
        parts.add(1, (n,))
    parts.add(1, (3,))  # 1 now holds 4 rows: full by itself
    # at 6 rows held, part 0 went (3 rows: a tie with 1, the first found); then 1, full at 4 rows
    assert handed == [(0, 3), (1, 4)] and parts.held == 0
    for n in range(5):
        parts.add(2 + n % 2, (n,))
    parts.add(2, (5,))
    assert handed[-1] == (2, 4) and parts.held == 2  # at 6 rows: 2 held 4 of them, 3 keeps its 2


def test_a_budget_of_bytes_bounds_big_rows():
    """The read stage's rows are packets of up to 64 KiB: a budget of their bytes, across parts,
    hands on the part holding the most bytes, however few rows it holds."""
    handed: list[tuple[int, int]] = []
    parts = PartColumns(("payload",), lambda part: handed.append((part, len(parts.take(part)[0]))), 8192,
                        held_bytes=100_000)
    for n in range(40):
        parts.add(n % 4, (b"x" * 1000,), 1000)  # 40 kB in 4 parts
    parts.add(3, (b"x" * 65_000,), 65_000)  # 105 kB: over the budget
    assert handed == [(3, 11)] and parts.held == 30 and parts.held_size == 30_000
    parts.add(0, (b"",), 0)
    assert len(handed) == 1  # rows of no size count for rows only

