"""Byte ranges: cutting a file anywhere and reading the pieces apart gives exactly the records, the
issues and (merged) the info of one whole read."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqpcap.capture.readers import CaptureError, CaptureInfo, CaptureIssue, rangeable, read_records, split_points
from tests.helpers.captures import UNCOMPRESSED, epb, frames, idb, isb, pcap, record_spans, sample_bytes, sample_id, shb
from tests.helpers.samples import SAMPLES

FACTS = ("records", "bytes", "first_ts_ns", "last_ts_ns", "link_types", "resolutions", "format", "snaplen")


def timed(records, info: CaptureInfo) -> list:
    """The records, each timing the damage found just before it, as every reader of records does
    (amqpcap.connection.decoder.PacketFeed, amqpcap.capture.bucketing.SegmentBuckets)."""
    out, known = [], 0
    for record in records:
        if len(info.issues) != known:
            known = info.time_issues(record[0], known)
        out.append(record)
    return out


def whole(path) -> tuple[list, CaptureInfo]:
    info = CaptureInfo(str(path), path.stat().st_size)
    records = timed(read_records(str(path), info), info)
    info.time_issues(info.last_ts_ns)
    return records, info


def in_ranges(path, cuts) -> tuple[list, CaptureInfo]:
    """Read apart, merged as the job's driver merges them; damage timed the same (one rule: a range's
    last damage is timed by the next range's first record)."""
    size = path.stat().st_size
    points = [0, *sorted(set(cuts)), size]
    merged, records = CaptureInfo(str(path), size), []
    for start, end in zip(points, points[1:]):
        part = CaptureInfo(str(path), size)
        records += timed(read_records(str(path), part, start=start, end=end), part)
        merged.merge(part)
    merged.time_issues(merged.last_ts_ns)
    return records, merged


def assert_same(path, cuts):
    records, info = whole(path)
    pieces, merged = in_ranges(path, cuts)
    assert pieces == records, cuts
    assert [getattr(merged, name) for name in FACTS] == [getattr(info, name) for name in FACTS], cuts
    assert merged.issues == info.issues, cuts
    assert (merged.start_offset, merged.end_offset) == (info.start_offset, info.end_offset) == \
        (info.start_offset, path.stat().st_size)


@pytest.mark.parametrize("path", UNCOMPRESSED, ids=sample_id)
@settings(derandomize=True, max_examples=25, deadline=None)
@given(data=st.data())
def test_random_cuts_give_the_whole_read(path, data):
    size = path.stat().st_size
    cuts = data.draw(st.lists(st.integers(1, size - 1), max_size=6))
    assert_same(path, cuts)


@pytest.mark.parametrize("name", ["crafted/vlan_qinq.pcap", "ipv6_pcapng.pcapng", "confirms.pcap"])
def test_every_cut_near_every_record_start(name):
    """One cut at each byte from 20 before to 20 after each record (block) start."""
    path = SAMPLES / name
    records, info = whole(path)
    size = path.stat().st_size
    for start, _ in record_spans(sample_bytes(path)):
        for cut in range(max(1, start - 20), min(size, start + 21)):
            first = CaptureInfo(str(path), size)
            second = CaptureInfo(str(path), size)
            pieces = list(read_records(str(path), first, end=cut)) + \
                list(read_records(str(path), second, start=cut))
            assert pieces == records, cut
            assert first.end_offset == second.start_offset, cut
            first.merge(second)
            assert (first.records, first.bytes, first.issues) == (info.records, info.bytes, info.issues), cut


@pytest.fixture
def small_reads(monkeypatch):
    """Reads and lookaheads of a few hundred bytes: every path that reads on runs, on small files."""
    import amqpcap.capture.readers.pcap as pcap_module
    import amqpcap.capture.readers.pcapng as pcapng_module
    import amqpcap.capture.readers.source as source
    monkeypatch.setattr(source, "CHUNK", 301)
    monkeypatch.setattr(pcap_module, "LOOKAHEAD", 457)
    monkeypatch.setattr(pcapng_module, "LOOKAHEAD", 457)


@pytest.mark.parametrize("name", ["connection_errors.pcap", "ipv6_pcapng.pcapng", "large_and_pipelined.pcap"])
def test_cuts_with_small_reads(name, small_reads):
    path = SAMPLES / name
    size = path.stat().st_size
    assert_same(path, list(range(size // 7, size, size // 7)))
    assert_same(path, [100, 1000, 1500, 3000, size - 500])


def test_cuts_around_damage_with_small_reads(tmp_path, small_reads):
    """Ranges whose ends fall on or near damage, and on a day's jump, join as a whole read does."""
    data = sample_bytes(SAMPLES / "connection_errors.pcap")
    spans = record_spans(data)
    mutant = bytearray(data)
    mutant[spans[40][0] + 10] ^= 0x04  # caplen of record 40
    mutant[spans[90][0] + 3] ^= 0x10  # time of record 90
    at = spans[150][0]
    mutant = bytes(mutant[:at]) + b"garbage" * 30 + bytes(mutant[at:])
    path = tmp_path / "damaged.pcap"
    path.write_bytes(mutant)
    records, info = whole(path)
    assert len(info.issues) == 3
    for start, _ in (spans[38], spans[40], spans[41], spans[89], spans[90], spans[91], spans[149], spans[150]):
        for delta in (-17, -1, 0, 1, 5, 16, 200):
            assert_same(path, [start + delta])
    for delta in (-1, 0, 1):  # a range that ends just after the garbage
        assert_same(path, [at + len(b"garbage") * 30 + delta])
    assert all(issue.ts_ns is not None for issue in info.issues)


def test_damage_no_record_of_its_range_follows_is_timed_by_the_next_ranges_first():
    """(What a whole read does: the record read right after the damage times it.)"""
    first, second = CaptureInfo("f", 100), CaptureInfo("f", 100)
    first.start_offset, first.end_offset, second.start_offset, second.end_offset = 24, 50, 50, 100
    first.records, first.first_ts_ns, first.last_ts_ns = 1, 10, 10
    first.issues = [CaptureIssue("damaged-record-header", "x", 1, 6, 44, 50, ts_ns=None)]
    second.records, second.first_ts_ns, second.last_ts_ns = 2, 20, 30
    merged = CaptureInfo("f", 100)
    for part in (first, second):
        merged.merge(part)
    assert [issue.ts_ns for issue in merged.issues] == [20]


def test_a_range_with_no_record_start_is_empty():
    path = SAMPLES / "large_and_pipelined.pcap"  # records of up to 64 kB
    start, end = max(record_spans(sample_bytes(path)), key=lambda span: span[1] - span[0])
    assert end - start > 60_000
    info = CaptureInfo(str(path), 0)
    assert list(read_records(str(path), info, start=start + 100, end=start + 50_000)) == []
    assert info.start_offset == info.end_offset == end


def test_split_points_and_rangeable(tmp_path):
    assert split_points(1000, 300) == [0, 333, 666, 1000]
    assert split_points(1000, 5000) == [0, 1000]
    assert split_points(0, 100) == [0]
    assert rangeable(str(SAMPLES / "confirms.pcap")) and rangeable(str(SAMPLES / "ipv6_pcapng.pcapng"))
    assert not rangeable(str(SAMPLES / "kombu_gzip.pcap.gz"))
    assert not rangeable(str(tmp_path / "missing.pcap"))


def test_ranges_refuse_gzip_and_pipes():
    from tests.helpers.captures import pipe
    with pytest.raises(CaptureError, match="gzip"):
        read_records(str(SAMPLES / "kombu_gzip.pcap.gz"), start=100)
    with pytest.raises(CaptureError, match="seek"):
        read_records("-", source=pipe((SAMPLES / "confirms.pcap").read_bytes()), start=100)


# -- files the samples do not cover -------------------------------------------------------------

def test_pcapng_interfaces_described_mid_file(tmp_path):
    """dumpcap may describe an interface after packets of others: a range that starts after that
    description but does not read it learns it when one of its packets names that interface."""
    packets = frames(60)
    blocks = [shb(), idb(1)] + [epb(0, 10**15 + i, d) for i, d in enumerate(packets[:20])] + [idb(113, tsresol=9)]
    blocks += [epb(i % 2, 10**15 + i * (1 if i % 2 == 0 else 1000), d) for i, d in enumerate(packets[20:], 20)]
    blocks += [isb(0), isb(1)]
    path = tmp_path / "late_interface.pcapng"
    path.write_bytes(b"".join(blocks))
    records, info = whole(path)
    assert {r[1] for r in records} == {1, 113} and info.ok
    size = path.stat().st_size
    for cut in range(1, size, 97):
        assert_same(path, [cut])
    assert_same(path, list(range(1000, size, 1500)))


def test_concatenated_pcaps_with_other_parameters_are_flagged_when_read_in_ranges(tmp_path):
    first = pcap([(10**18 + i * 10**6, d) for i, d in enumerate(frames(30))], link_type=1)
    second = pcap([(10**18 + i * 10**6, d) for i, d in enumerate(frames(30, seed=5))], link_type=113)
    path = tmp_path / "cat.pcap"
    path.write_bytes(first + second)
    records, info = whole(path)
    assert [issue.kind for issue in info.issues] == ["concatenated-capture"]
    assert {r[1] for r in records[:30]} == {1} and {r[1] for r in records[30:]} == {113}
    # a cut in the first capture: the ranges join
    assert_same(path, [len(first) // 2])
    # a cut in the second: that range cannot know its header, and the merge says so
    pieces, merged = in_ranges(path, [len(first) + 500])
    assert "inconsistent-ranges" in [issue.kind for issue in merged.issues]


def test_a_pcap_of_another_byte_order_is_read_by_the_range_before(tmp_path):
    """A concatenated capture whose byte order differs holds no boundary the first header's rules
    accept: the range before reads on to the end, the next ones are empty, nothing is lost."""
    first = pcap([(10**18 + i * 10**6, d) for i, d in enumerate(frames(30))])
    second = pcap([(10**18 + i * 10**6, d) for i, d in enumerate(frames(30, seed=5))], order=">")
    path = tmp_path / "cat.pcap"
    path.write_bytes(first + second)
    assert_same(path, [len(first) // 2, len(first) + 300, len(first) + 2000])
    assert struct.unpack(">I", second[:4])[0] == 0xA1B2C3D4


def assert_offsets_place_the_bytes(path, cuts=()):
    """Read with offsets (whole or in ranges): the records of a read without, each with, where the
    fast path read it, the offset of its bytes in the file; most records have one."""
    data, size = path.read_bytes(), path.stat().st_size
    records, _ = whole(path)
    points = [0, *sorted(set(cuts)), size]
    placed = []
    for start, end in zip(points, points[1:]):
        placed += read_records(str(path), CaptureInfo(str(path), size), start=start, end=end, offsets=True)
    assert [record[:3] for record in placed] == records, cuts
    with_offset = [record for record in placed if len(record) == 4]
    assert all(data[at:at + len(record)] == record for _, _, record, at in with_offset), cuts
    assert len(with_offset) >= 0.9 * len(records)


@pytest.mark.parametrize("path", UNCOMPRESSED, ids=sample_id)
def test_records_read_with_offsets_say_where_their_bytes_lie(path):
    size = path.stat().st_size
    assert_offsets_place_the_bytes(path)
    assert_offsets_place_the_bytes(path, [size // 3, 2 * size // 3])


@pytest.mark.parametrize("name", ["connection_errors.pcap", "ipv6_pcapng.pcapng", "large_and_pipelined.pcap"])
def test_offsets_with_small_reads(name, small_reads):
    path = SAMPLES / name
    size = path.stat().st_size
    assert_offsets_place_the_bytes(path, list(range(size // 7, size, size // 7)))


def test_offsets_around_damage(tmp_path, small_reads):
    data = sample_bytes(SAMPLES / "connection_errors.pcap")
    spans = record_spans(data)
    mutant = bytearray(data)
    mutant[spans[40][0] + 10] ^= 0x04  # caplen of record 40
    at = spans[150][0]
    path = tmp_path / "damaged.pcap"
    path.write_bytes(bytes(mutant[:at]) + b"garbage" * 30 + bytes(mutant[at:]))
    assert_offsets_place_the_bytes(path)
    assert_offsets_place_the_bytes(path, [spans[39][0] + 5, spans[150][0]])


def test_a_compressed_capture_gives_no_offsets():
    path = SAMPLES / "kombu_gzip.pcap.gz"
    records = list(read_records(str(path), CaptureInfo(str(path), path.stat().st_size), offsets=True))
    assert records and all(len(record) == 3 for record in records)
