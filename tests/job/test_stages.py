"""The job's stage tasks called directly (no Spark): staging by connection bucket, and one bucket
decoded into every table exactly as the library tabulates the same capture."""

from __future__ import annotations

import json
import os
import socket
from collections import defaultdict

import pyarrow as pa
import pytest

from amqpcap.capture.bucketing import SEGMENT_COLUMNS, bucket_of
from amqpcap.capture.inputs import canonical_uri
from amqpcap.connection.decoder import CaptureDecoder
from amqpcap.job.stages.decode import decode_bucket
from amqpcap.job.stages.read import SEGMENTS, read_unit, staged_path
from amqpcap.job.work import BucketFile, BucketWork, ReadResult, ReadUnit
from amqpcap.settings import Settings
from tests.helpers.captures import ALL_SAMPLES, sample_id
from tests.helpers.samples import SAMPLES
from tests.helpers.tabulated import canonical, tabulate


def test_a_connection_has_one_bucket_from_either_side_in_every_process():
    a, b = socket.inet_aton("10.0.0.1"), socket.inet_aton("10.0.0.2")
    assert bucket_of(a, 40000, b, 5672, 7) == bucket_of(b, 5672, a, 40000, 7)
    # not Python's salted hash(): another process with another hash seed agrees
    import subprocess
    import sys
    probe = ("import socket; from amqpcap.capture.bucketing import bucket_of; "
             "print(bucket_of(socket.inet_aton('10.0.0.1'), 40000, socket.inet_aton('10.0.0.2'), 5672, 1 << 30))")
    others = {subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             env={"PYTHONHASHSEED": seed}).stdout.strip() for seed in ("1", "2")}
    assert others == {str(bucket_of(a, 40000, b, 5672, 1 << 30))}
    assert len({bucket_of(a, port, b, 5672, 4) for port in range(40000, 40100)}) == 4


def test_the_staged_schema_holds_the_rows_bucketing_makes():
    assert tuple(SEGMENTS.names) == SEGMENT_COLUMNS


def unit(path, index=0) -> ReadUnit:
    path = str(path)
    import os
    return ReadUnit(index, 0, canonical_uri(path), 0, None, os.path.getsize(path))


def test_reading_stages_every_segment_once(tmp_path):
    path = SAMPLES / "concurrent.pcap"
    staged, facts = read_unit(unit(path), str(tmp_path), buckets=3)
    decoder = CaptureDecoder()
    list(decoder.decode([str(path)]))
    assert sum(staged.values()) == decoder.stats.tcp_segments == facts.segments
    assert facts.status == "ok" and facts.info.records == decoder.stats.packets
    assert len(facts.fingerprint) == 64
    ports = defaultdict(set)  # each connection's segments all went to one bucket
    for bucket in staged:
        table = pa.ipc.open_file(staged_path(str(tmp_path), 0, bucket)).read_all()
        for sport, dport in zip(table.column("sport").to_pylist(), table.column("dport").to_pylist()):
            ports[frozenset((sport, dport))].add(bucket)
    assert len(ports) >= 4 and all(len(buckets) == 1 for buckets in ports.values())


@pytest.mark.parametrize("path", ALL_SAMPLES, ids=sample_id)
def test_the_staged_files_hold_the_parsers_segments_value_for_value(tmp_path, path):
    """The read stage packs its segments into Arrow without a conversion per value
    (amqpcap.capture.packets.packed_columns): read back, its files hold, per bucket and in capture
    order, what the packet parser and the stream numbering give packet by packet (IPv6
    addresses, empty payloads and all)."""
    from amqpcap.capture.packets import PacketParser
    from amqpcap.capture.readers import CaptureInfo, read_records
    from amqpcap.capture.stream_index import RangeStreams
    parser, streams, want = PacketParser(), RangeStreams(), defaultdict(list)
    for index, (ts_ns, link_type, data) in enumerate(read_records(str(path), CaptureInfo(str(path), 0))):
        s = parser.parse(ts_ns, link_type, data)
        if s is not None:
            stream = streams.segment(s.src, s.sport, s.dst, s.dport, s.flags, s.seq, ts_ns)
            want[bucket_of(s.src, s.sport, s.dst, s.dport, 3)].append(
                {"ts_ns": ts_ns, "record": index, "stream": stream, "src": s.src, "sport": s.sport, "dst": s.dst,
                 "dport": s.dport, "seq": s.seq, "ack": s.ack, "flags": s.flags, "payload": s.payload,
                 "at": -1, "size": len(s.payload)})
    staged, facts = read_unit(unit(path), str(tmp_path), buckets=3)
    got = {bucket: pa.ipc.open_file(staged_path(str(tmp_path), 0, bucket)).read_all() for bucket in staged}
    assert all(table.schema == SEGMENTS for table in got.values())
    assert {bucket: table.to_pylist() for bucket, table in got.items()} == dict(want)


@pytest.mark.parametrize("place", [False, True], ids=["payloads", "placed"])
@pytest.mark.parametrize("path", ALL_SAMPLES, ids=sample_id)
def test_the_decode_stage_reads_back_the_segments_the_parser_made(tmp_path, path, place):
    """Staged (packed), then read back by the decode stage: every field of every segment as the
    parser made it, in capture order, numbered as the file shows it. Placed: the payloads of an
    uncompressed capture are not staged but read from the capture (amqpcap.job.stages.placed)."""
    import pyarrow.fs as pafs

    from amqpcap.capture.packets import PacketParser
    from amqpcap.capture.readers import CaptureInfo, read_records
    from amqpcap.job.stages.decode import _batches
    fields = ("ts_ns", "src", "sport", "dst", "dport", "seq", "ack", "flags", "payload", "record", "stream", "at",
              "size")
    parser, want = PacketParser(), defaultdict(list)
    for index, (ts_ns, link_type, data) in enumerate(read_records(str(path), CaptureInfo(str(path), 0))):
        s = parser.parse(ts_ns, link_type, data)
        if s is not None:
            s.record, s.stream = 1000 + index + 1, -1  # (the unit is not numbered here: no tcp.stream)
            want[bucket_of(s.src, s.sport, s.dst, s.dport, 3)].append(tuple(getattr(s, f) for f in fields))
    staged, _ = read_unit(unit(path), str(tmp_path), buckets=3, place_payloads=place)
    staged_bytes = sum(pa.ipc.open_file(staged_path(str(tmp_path), 0, b)).read_all().column("payload").nbytes
                       for b in staged)
    payload_bytes = sum(len(row[fields.index("payload")]) for rows in want.values() for row in rows)
    if place and not path.name.endswith(".gz"):
        assert staged_bytes < payload_bytes or payload_bytes == 0
    else:
        assert staged_bytes >= payload_bytes
    for bucket in staged:
        got = _batches(pafs.LocalFileSystem(), [(staged_path(str(tmp_path), 0, bucket), 1000, 0)], str(tmp_path), 0)
        assert [tuple(getattr(s, f) for f in fields) for _, segments in got for s in segments] == want[bucket]
    assert sum(map(len, want.values())) == sum(staged.values()) > 0


def _read_back(staging, staged) -> list[tuple]:
    import pyarrow.fs as pafs

    from amqpcap.job.stages.decode import _batches
    got = []
    for bucket in sorted(staged):
        got += [(s.ts_ns, s.seq, s.payload) for _, segments in
                _batches(pafs.LocalFileSystem(), [(staged_path(str(staging), 0, bucket), 0, 0)], str(staging), 0)
                for s in segments]
    return got


def test_payloads_left_in_the_capture_are_read_from_it_in_small_steps_the_pages_given_back(tmp_path, monkeypatch):
    """Many staged batches, the capture's pages released behind each: the same segments as staged bytes."""
    import amqpcap.job.stages.decode as decode
    import amqpcap.job.stages.placed as placed
    import amqpcap.job.stages.read as read
    path = SAMPLES / "large_and_pipelined.pcap"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    want = _read_back(tmp_path / "a", read_unit(unit(path), str(tmp_path / "a"), buckets=3)[0])
    monkeypatch.setattr(read, "FLUSH_ROWS", 16)
    monkeypatch.setattr(placed, "RELEASE_BYTES", 1)
    monkeypatch.setattr(decode, "PLACED_SLICE", 3)
    released = []
    monkeypatch.setattr(placed.CaptureBytes, "release",
                        lambda self, offset, release=placed.CaptureBytes.release: (released.append(offset),
                                                                                  release(self, offset)))
    staged, _ = read_unit(unit(path), str(tmp_path / "b"), buckets=3, place_payloads=True)
    assert _read_back(tmp_path / "b", staged) == want and len(want) > 50
    assert len(released) >= 20


def test_a_capture_replaced_or_cut_short_after_the_read_stage_fails_its_decode_task(tmp_path):
    """Appended to (a capture still being written), it is read as it was."""
    from amqpcap.job.stages.placed import CaptureChanged
    original = (SAMPLES / "confirms.pcap").read_bytes()
    capture, staging = tmp_path / "capture.pcap", tmp_path / "staging"
    capture.write_bytes(original)
    staging.mkdir()
    staged, _ = read_unit(unit(capture), str(staging), buckets=1, place_payloads=True)
    want = _read_back(staging, staged)
    assert want and all(payload == b"" or payload in original for _, _, payload in want)
    with open(capture, "ab") as appending:
        appending.write(b"\0" * 1000)
    assert _read_back(staging, staged) == want
    with open(capture, "r+b") as cutting:
        cutting.truncate(len(original) // 2)
    with pytest.raises(ValueError, match="the file has changed since it was read"):
        _read_back(staging, staged)
    replacement = tmp_path / "other.pcap"
    replacement.write_bytes(original)
    os.replace(replacement, capture)  # the same bytes, but another file
    with pytest.raises(CaptureChanged, match="replaced after the read stage read it"):
        _read_back(staging, staged)
    capture.unlink()
    with pytest.raises(CaptureChanged, match="removed after the read stage read it"):
        _read_back(staging, staged)


def test_decoding_the_buckets_gives_the_library_tables(tmp_path):
    path = SAMPLES / "concurrent.pcap"
    staging, root = tmp_path / "staging", tmp_path / "lake"
    staging.mkdir()
    from amqpcap.job.stages.numbering import number_units
    staged, facts = read_unit(unit(path), str(staging), buckets=3)
    bases = number_units([unit(path)], {0: ReadResult(0, staged, facts)}, str(staging))
    files = []
    assert len(staged) >= 2
    for bucket in staged:
        others = {b for b in staged if b != bucket and os.path.exists(staged_path(str(staging), 0, b))}
        files += decode_bucket(BucketWork(bucket, [BucketFile(0, [0])]), str(staging), [canonical_uri(str(path))],
                               Settings(), "r", str(root), bases=bases)
        # a decoded bucket's segments are gone (no other task reads them); the others' are there
        assert not os.path.exists(staged_path(str(staging), 0, bucket))
        assert all(os.path.exists(staged_path(str(staging), 0, b)) for b in others)
    import pyarrow.parquet as pq
    expected = tabulate([canonical_uri(str(path)).removeprefix("file://")])
    for name in ("frames", "deliveries", "publishes", "connections", "channels"):
        rows = []
        for f in (f for f in files if f.table == name):
            day = f.date
            rows += [{**r, "date": __import__("datetime").date.fromisoformat(day)}
                     for r in pq.read_table(root / name / f.path).to_pylist()]
        got = canonical(name, _micros(rows), str(SAMPLES))
        want = canonical(name, expected[name], str(SAMPLES))
        unnamed = {"capture": None, "source": None, "provisional": None}  # which file: the paths differ
        assert [json.loads(g) | unnamed for g in got] == [json.loads(w) | unnamed for w in want]


def _micros(rows):
    import datetime
    out = []
    for row in rows:
        out.append({k: (int(v.timestamp()) * 1_000_000 + v.microsecond if isinstance(v, datetime.datetime) else v)
                    for k, v in row.items()})
    return out


def test_record_numbers_and_tcp_streams_of_a_file_read_in_ranges(tmp_path):
    """A file read as three byte ranges by blind tasks: the driver's numbering gives every frame
    the pcap record and TCP stream numbers the one-pass library gives it (Wireshark's, tested in
    tests/connection/test_tshark.py)."""
    import os

    import pyarrow.parquet as pq

    from amqpcap.job.stages.numbering import number_units
    path = SAMPLES / "concurrent.pcap"
    size, uri = os.path.getsize(path), canonical_uri(str(path))
    staging, root = tmp_path / "staging", tmp_path / "lake"
    staging.mkdir()
    edges = [0, size // 3, 2 * size // 3, size]
    plans = [ReadUnit(i, 0, uri, start, end if end < size else None, size) for i, (start, end) in
             enumerate(zip(edges, edges[1:]))]
    staged = {u.unit: ReadResult(u.unit, *read_unit(u, str(staging), buckets=3)) for u in plans}
    assert all(read.facts.records > 0 for read in staged.values())  # each range read some
    bases = number_units(plans, staged, str(staging))
    files = []
    for bucket in {b for read in staged.values() for b in read.staged}:
        units = [u.unit for u in plans if bucket in staged[u.unit].staged]
        files += decode_bucket(BucketWork(bucket, [BucketFile(0, units)]), str(staging), [uri], Settings(), "r",
                               str(root), bases=bases)
    key = ("connection", "direction", "stream_offset")
    ours = {tuple(r[k] for k in key): (r["pcap_record"], r["pcap_record_last"], r["tcp_stream"])
            for f in files if f.table == "frames" for r in pq.read_table(root / "frames" / f.path).to_pylist()}
    library = {(r["connection"], r["dir"], r["offset"]): (r["pcap_record"], r["pcap_record_last"], r["tcp_stream"])
               for r in CaptureDecoder().decode([str(path)]) if r["kind"] not in ("issue",)}
    assert len(ours) > 100 and ours == library
    assert len({stream for _, _, stream in ours.values()}) > 3


def test_staged_flow_sides_pair_as_the_library_does(tmp_path):
    """Every bucket's decode task stages its publishes' and deliveries' sides in 3 parts of the key
    space; the flows tasks of those parts, run in any order, give the library's message_flows."""
    import datetime
    import os

    import pyarrow.parquet as pq

    from amqpcap.job.stages.flows import flows_task
    from amqpcap.job.stages.numbering import number_units
    paths = [SAMPLES / name for name in ("concurrent.pcap", "confirms.pcap", "large_and_pipelined.pcap")]
    staging, root = tmp_path / "staging", tmp_path / "lake"
    staging.mkdir()
    uris = [canonical_uri(str(p)) for p in paths]
    plans = [ReadUnit(i, i, uri, 0, None, os.path.getsize(p)) for i, (p, uri) in enumerate(zip(paths, uris))]
    staged = {u.unit: ReadResult(u.unit, *read_unit(u, str(staging), buckets=3)) for u in plans}
    bases = number_units(plans, staged, str(staging))
    for bucket in {b for read in staged.values() for b in read.staged}:
        by_file = [BucketFile(u.file_index, [u.unit]) for u in plans if bucket in staged[u.unit].staged]
        decode_bucket(BucketWork(bucket, by_file), str(staging), uris, Settings(), "r", str(root),
                      bases=bases, flow_parts=3)
    assert len(os.listdir(staging / "flows")) > 3  # parts from several buckets
    files = list(flows_task(iter([2, 0]), str(staging), str(root), "r", 100)) + \
        list(flows_task(iter([1]), str(staging), str(root), "r", 100))
    rows = [{**r, "date": datetime.date.fromisoformat(f.date)}
            for f in files for r in pq.read_table(root / "message_flows" / f.path).to_pylist()]
    expected = tabulate([str(p) for p in paths])["message_flows"]
    assert sum(1 for r in expected if r["match"] is not None) > 50
    unnamed = {"source": None, "provisional": None}  # the library's rows come from no job
    got = [json.loads(g) | unnamed for g in canonical("message_flows", _micros(rows), str(SAMPLES))]
    want = [json.loads(w) | unnamed for w in canonical("message_flows", expected, str(SAMPLES))]
    assert got == want


@pytest.mark.parametrize("given", ["rows", "batches"])
def test_rows_staged_in_many_parts_are_held_within_one_budget(tmp_path, given):
    """message_flows has more parts of its key space for a bigger night: what a task holds before
    writing is bounded across all parts, not per part, and every row still reaches its part's file
    in the order it came; given one by one, or in Arrow batches (as message_flows' sides come)."""
    import pyarrow.fs as pafs

    from amqpcap.job.stages.staged import StagedFiles
    schema = pa.schema([("part", pa.int32()), ("n", pa.int64())])
    files = StagedFiles(pafs.LocalFileSystem(), schema, lambda part: f"{tmp_path}/p{part}.arrow",
                        flush_rows=4096, held_rows=1000)
    parts, rows, most = 75, 20_000, 0
    for start in range(0, rows, 3):  # three rows at a time, to one part
        part = start // 3 * 7919 % parts
        numbers = range(start, min(start + 3, rows))
        if given == "rows":
            for n in numbers:
                files.add(part, (part, n))
        else:
            files.add_batch(part, pa.record_batch([pa.array([part] * len(numbers), pa.int32()),
                                                   pa.array(numbers, pa.int64())], schema=schema))
        most = max(most, sum(files.parts.rows(each) for each in files.parts.buffers) + files.batches_held)
    written = files.close()
    assert 990 <= most < 1000
    for part in range(parts):
        with pa.ipc.open_file(f"{tmp_path}/p{part}.arrow") as reader:
            table = reader.read_all()
        want = [n for n in range(rows) if n // 3 * 7919 % parts == part]
        assert table["n"].to_pylist() == want and written[part] == len(want)
        assert set(table["part"].to_pylist()) == {part}


def test_the_read_stage_holds_a_bounded_number_of_payload_bytes(tmp_path):
    """However many buckets, a read task holds at most HELD_BYTES of payloads before writing them."""
    import pyarrow.fs as pafs

    from amqpcap.capture.bucketing import HeldSegments, SegmentBuckets
    from amqpcap.capture.readers import CaptureInfo, read_records
    from amqpcap.job.stages.staged import StagedFiles
    path = SAMPLES / "long_connection.pcap.gz"
    records = list(read_records(str(path), CaptureInfo(str(path), path.stat().st_size)))
    budget, most = 50_000, 0
    files = StagedFiles(pafs.LocalFileSystem(), SEGMENTS, lambda part: f"{tmp_path}/b{part}.arrow", 8192,
                        held_bytes=budget, buffer=HeldSegments)
    sorter = SegmentBuckets(16, files.parts)
    for record in records:
        sorter.read([record])
        most = max(most, files.parts.held_size)
    staged = files.close()
    payloads = sum(len(p) for part in staged for p in pa.ipc.open_file(f"{tmp_path}/b{part}.arrow")
                   .read_all()["payload"].to_pylist())
    assert payloads > 10 * budget  # the capture holds many budgets' worth
    assert most < budget + 65_536  # never more than the budget and the packet that crossed it


def test_overlapping_files_batches_are_merged_by_time_into_runs_of_one_file():
    """Two files whose batches overlap in time (two sensors): their segments in time order, a file
    before the other on a tie, handed on as runs of one file's segments (each with its file)."""
    import types

    from amqpcap.job.stages.decode import _merged

    def stream(file_index, *batches):
        return iter([(file_index, [types.SimpleNamespace(ts_ns=t, name=f"{file_index}@{t}") for t in batch])
                     for batch in batches])
    runs = list(_merged([stream(0, [1, 2, 5], [6, 9]), stream(1, [3, 4], [5, 7, 8], [10])]))
    assert [(file_index, [s.name for s in segments]) for file_index, segments in runs] == [
        (0, ["0@1", "0@2"]), (1, ["1@3", "1@4"]), (0, ["0@5"]), (1, ["1@5"]), (0, ["0@6"]), (1, ["1@7", "1@8"]),
        (0, ["0@9"]), (1, ["1@10"])]


def test_files_are_merged_only_where_their_times_overlap():
    """A decode task reads rotated files one after another (one batch of one file held at a time)
    and merges by time only the files whose segments overlap; a tie at a boundary merges."""
    from amqpcap.job.stages.decode import _overlapping
    hour = 3_600 * 10**9
    rotated = [BucketFile(i, [i], i * hour, (i + 1) * hour - 1) for i in range(4)]
    assert _overlapping(rotated) == [[f] for f in rotated]
    # a second sensor's file over hours 1-2, a file whose clock went back, one touching its neighbour
    other = BucketFile(4, [4], hour + 5, 2 * hour + 5)
    back = BucketFile(5, [5, 6], 3 * hour - 10, 3 * hour + 7)
    touching = BucketFile(6, [7], 4 * hour - 1, 5 * hour)
    groups = _overlapping([*rotated, other, back, touching])
    assert [[f.file_index for f in group] for group in groups] == [[0], [1, 4, 2, 5, 3, 6]]
    unknown = [BucketFile(0, [0]), BucketFile(1, [1])]
    assert _overlapping(unknown) == [unknown]  # spans not known: one merge


def test_a_failed_decode_task_leaves_its_segments_for_the_next_attempt(tmp_path, monkeypatch):
    import pytest

    from amqpcap.job.stages.numbering import number_units
    from amqpcap.lake.tablefiles import TableFiles
    path = SAMPLES / "concurrent.pcap"
    staging, root = tmp_path / "staging", tmp_path / "lake"
    staging.mkdir()
    staged, facts = read_unit(unit(path), str(staging), buckets=1)
    bases = number_units([unit(path)], {0: ReadResult(0, staged, facts)}, str(staging))

    def failing(self):
        raise OSError("disk full")
    monkeypatch.setattr(TableFiles, "close", failing)
    with pytest.raises(OSError):
        decode_bucket(BucketWork(0, [BucketFile(0, [0])]), str(staging), [canonical_uri(str(path))], Settings(),
                      "r", str(root), bases=bases)
    assert os.path.exists(staged_path(str(staging), 0, 0))
    monkeypatch.undo()
    files = decode_bucket(BucketWork(0, [BucketFile(0, [0])]), str(staging), [canonical_uri(str(path))], Settings(),
                          "r", str(root), bases=bases)
    assert sum(f.rows for f in files if f.table == "frames") > 100
    assert not os.path.exists(staged_path(str(staging), 0, 0))
