"""The seed corpus (tests/fuzz/corpus/): inputs that once failed, replayed on every run (not slow).

`test_replay` runs each file through its target's properties (the known findings tolerated, as
in the fuzz tests), so a regression elsewhere shows at once. Each finding then has a strict xfail
test saying what should happen: it fails while the bug is there and turns red (XPASS) the moment
it is fixed; then remove its marker, and its recogniser in known.py. corpus/README.md lists the
findings with their diagnosis; corpus/build.py rebuilds the files.
"""

from __future__ import annotations

import base64
import io
import struct
import tempfile
from pathlib import Path

import pytest

from amqpcap.capture.readers import CaptureInfo, read_records
from amqpcap.cli import main as cli
from amqpcap.connection.decoder import CaptureDecoder
from amqpcap.protocol import fieldtable
from amqpcap.protocol.errors import MalformedPayload
from amqpcap.tables.rows import to_json
from tests.fuzz import oracles, targets
from tests.fuzz.corpus.build import HEADER, conversation, method, shortstr
from tests.fuzz.mutators import nested, write_pcap
from tests.fuzz.oracles import parse_capture

CORPUS = Path(__file__).resolve().parent / "corpus"
FILES = sorted(p for p in CORPUS.iterdir() if p.name.startswith(("codec-", "reader-", "stream-")))


def corpus(name: str) -> Path:
    return CORPUS / name


def decode(path: Path, settings: str = "default") -> tuple[list, object]:
    decoder = CaptureDecoder(targets.SETTINGS[settings], collect_connections=True)
    return list(decoder.decode([str(path)])), decoder.stats


def decode_bytes(data: bytes, settings: str = "default") -> tuple[list, object]:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "capture.pcap"
        path.write_bytes(data)
        return decode(path, settings)


def whole(data: bytes) -> tuple[list, CaptureInfo]:
    info = CaptureInfo("corpus", len(data))
    return list(read_records("corpus", info, io.BytesIO(data))), info


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_replay(path):
    data = path.read_bytes()
    if path.name.startswith("codec-"):
        for name in targets.CODEC_NAMES:
            targets.check_codec(targets.codec(name), data, 0)
    elif path.name.startswith("reader-"):
        cuts = sorted({len(data) // 3, len(data) // 2, 2 * len(data) // 3})
        targets.check_reader(data, ranges=[(a, len(data)) for a in cuts if 0 < a < len(data)])
    else:
        for settings in targets.SETTINGS:
            targets.decode_capture(data, settings, path.name)


def test_the_corpus_is_what_build_makes():
    from tests.fuzz.corpus.build import build
    built = build()
    assert sorted(built) == [p.name for p in FILES]
    for name, data in built.items():
        assert corpus(name).read_bytes() == data, name


# -- the findings ----------------------------------------------------------------------------------

def test_f1_a_deeply_nested_field_table_is_malformed_not_unwritable():
    """F1, fixed: a field table nested 260 levels deep decoded (the limit was 400), but orjson, which
    writes --jsonl and args_json, stops at 255 levels. Now anything deeper than 200 is malformed."""
    data = corpus("codec-deep-field-table.frame").read_bytes()
    for name in targets.CODEC_NAMES:
        with pytest.raises(MalformedPayload, match="nested deeper"):
            targets.codec(name).decode_frame(data, 0)
    records, _ = decode(corpus("stream-deep-field-table.pcap"))
    assert any(r["kind"] == "issue" and "nested deeper" in r["detail"] for r in records)
    for record in records:
        for render in targets.RENDER:
            render(record)
        if record["kind"] == "method":
            to_json(record["args"])


def test_f1_the_deepest_table_accepted_is_written():
    data = method(50, 10, struct.pack(">H", 0) + shortstr(b"q") + b"\x02" + nested(fieldtable.MAX_DEPTH - 1), 1)  # MAX_DEPTH tables
    records, _ = decode_bytes(write_pcap(conversation([HEADER, data])))
    (declare,) = [r for r in records if r.get("method") == "queue.declare"]
    for render in targets.RENDER:
        render(declare)
    to_json(declare["args"])


def test_f2_garbage_before_the_first_record_loses_no_record():
    """F2, fixed: the boundary search after a bogus header starts one byte after it, not past it."""
    data = corpus("reader-garbage-before-first-record.pcap").read_bytes()
    clean = parse_capture(data[:24] + data[25:]).records
    records, info = whole(data)
    assert records == clean
    assert [(i.kind, i.offset, i.end_offset) for i in info.issues] == [("damaged-record-header", 24, 25)]


def test_f2_a_torn_header_before_a_record_loses_no_record():
    data = corpus("reader-torn-header-before-record.pcap").read_bytes()
    second = 24 + 16 + int.from_bytes(data[32:36], "little")  # where record 1 starts without the torn bytes
    clean = parse_capture(data[:second] + data[second + 13:]).records
    records, info = whole(data)
    assert records == clean
    assert [(i.offset, i.end_offset) for i in info.issues] == [(second, second + 13)]


def test_f3_a_cut_second_gzip_member_skips_no_negative_bytes():
    """F3, fixed: a damaged gzip stream of two members reported bytes_skipped too small, even negative (the next member's bytes counted as consumed twice)."""
    data = corpus("reader-gzip-two-members-cut.pcap.gz").read_bytes()
    _, info = whole(data)
    (issue,) = [i for i in info.issues if i.kind == "gzip-damaged"]
    assert 0 <= issue.bytes_skipped <= len(data), issue


def test_f4_a_range_meets_an_undescribed_interface():
    """F4, fixed: reading a pcapng in a byte range, a packet naming an interface no block describes raised IndexError."""
    data = corpus("reader-pcapng-range-unknown-interface.pcapng").read_bytes()
    records, info = whole(data)
    assert [i.kind for i in info.issues] == ["unknown-interface"]
    info = CaptureInfo("corpus", len(data))
    ranged = list(read_records("corpus", info, io.BytesIO(data), start=1))
    assert ranged == records and [i.kind for i in info.issues] == ["unknown-interface"]


def reads_as_whole_at_every_cut(data: bytes, records: list) -> None:
    """Two ranges cut anywhere read the whole file's records, or say they cannot (inconsistent-ranges)."""
    for cut in range(1, len(data)):
        merged, parts = CaptureInfo("corpus", len(data)), []
        for start, end in ((0, cut), (cut, None)):
            info = CaptureInfo("corpus", len(data))
            parts += list(read_records("corpus", info, io.BytesIO(data), start=start, end=end))
            merged.merge(info)
        assert parts == records or "inconsistent-ranges" in [i.kind for i in merged.issues], cut


def test_f5_ranges_after_damage_before_the_interfaces():
    """F5, fixed: a range's catch-up read of the blocks before it passes damage as a whole read
    does, so it learns the interfaces described after the damage."""
    data = corpus("reader-pcapng-range-interfaces-after-damage.pcapng").read_bytes()
    records, _ = whole(data)
    reads_as_whole_at_every_cut(data, records)


def test_f6_records_after_a_damaged_time_are_read_aligned():
    """F6, fixed: one record with origlen < caplen at the file's start no longer turns the
    origlen rule off for the whole file (it is learned from the first records, by majority), so
    the search after damage does not accept headers read 4 bytes late."""
    data = corpus("reader-shifted-headers.pcap").read_bytes()
    literal = parse_capture(data).records  # the file is well formed; record 3's time is three days off
    records, _ = whole(data)
    for record in literal[4:]:
        assert record in records


def test_f7_a_split_protocol_header_on_another_port_is_found():
    """F7, fixed: on a port of no known protocol the bytes are held until they tell (a protocol
    header split over segments was classified not-amqp by its first two bytes)."""
    records, stats = decode(corpus("stream-split-protocol-header.pcap"))
    assert [r["kind"] for r in records][:2] == ["protocol-header", "method"]
    assert dict(stats.connections) == {"amqp": 1}


def test_f8_a_damaged_capture_in_readable_form(capsys):
    """F8, fixed: the readable view printed a capture-file issue (no connection, no time) as exit 70."""
    assert cli(["decode", "--quiet", str(corpus("stream-damaged-file-readable.pcap"))]) == 0
    assert "damaged-record-header" in capsys.readouterr().out


def test_f9_a_lost_streamed_body_frame_is_not_in_the_body():
    """F9, fixed: the bytes of a large body frame that streamed in and was then lost leave the body."""
    records, _ = decode(corpus("stream-streamed-body-truncated.pcap"), "bodies")
    (publish,) = [r for r in records if r.get("method") == "basic.publish"]
    message = publish["message"]
    assert len(base64.b64decode(message["body_b64"])) <= message["body_received"], message


def test_f10_no_record_before_the_stream_start():
    """F10, fixed: a segment starting before the stream's first byte gave a retransmission-conflict at a negative offset."""
    records, _ = decode(corpus("stream-conflict-before-start.pcap"))
    assert all(r["offset"] is None or r["offset"] >= 0 for r in records), \
        [(r["kind"], r.get("issue_kind"), r["offset"]) for r in records if (r["offset"] or 0) < 0]


def test_f11_bytes_are_counted_once():
    """F11, fixed: a streamed body frame with a gap inside and a bad frame-end counted the lost bytes twice."""
    records, stats = decode(corpus("stream-streamed-body-gap-bad-end.pcap.gz"))
    oracles.check_accounting(records, stats.connection_summaries)


def test_f12_a_time_beyond_64_bit_nanoseconds_is_an_issue_not_a_crash():
    """F12, fixed: a pcapng timestamp past 2262 stopped the whole run (OverflowError in the compiled
    packet parser). Now the packet keeps the previous packet's time and the file has an issue."""
    records, stats = decode(corpus("stream-pcapng-time-beyond-64-bits.pcapng"))
    assert [r["issue_kind"] for r in records if r["kind"] == "issue"] == ["unreadable-time"]
    assert [r["kind"] for r in records] == ["protocol-header", "issue", "heartbeat", "heartbeat"]
    assert stats.captures[0].issues[0].record == 4  # the fifth packet: the first heartbeat's


def test_f13_a_range_starting_with_an_untimed_packet_says_its_time_is_unknown():
    """F13, fixed: the first packet of a pcapng byte range, if it has no time of its own (an
    unreadable timestamp; a Simple Packet Block), took the time 0 (1970), where a whole read gives
    it the previous packet's. Now the range reports `inconsistent-ranges` (read the file whole)."""
    data = corpus("reader-pcapng-range-starts-untimed.pcapng").read_bytes()
    records, info = whole(data)
    assert [r[0] for r in records] == [1_700_000_000 * 10**9] * 2 + [1_700_000_001 * 10**9]
    assert [i.kind for i in info.issues] == ["unreadable-time"]
    untimed = data.index(bytes([2]) * 41) - 28 - 14  # the second packet's block (its frame's payload, less the
    # packet block's header and the Ethernet header)
    for start in (untimed - 5, untimed):  # inside the first packet, or exactly at the untimed one
        info = CaptureInfo("corpus", len(data))
        ranged = list(read_records("corpus", info, io.BytesIO(data), start=start))
        assert [r[1:] for r in ranged] == [r[1:] for r in records[1:]]  # the packets, but not the first one's time
        assert [i.kind for i in info.issues] == ["unreadable-time", "inconsistent-ranges"], info.issues
        assert info.issues[1].offset == untimed
    info = CaptureInfo("corpus", len(data))  # a range starting with a timed packet needs nothing
    assert list(read_records("corpus", info, io.BytesIO(data), start=untimed + 1)) == records[2:]
    assert info.issues == []


def test_f14_a_copied_header_whose_lengths_agree_by_chance_is_garbage_not_a_block():
    """F14, fixed: a copy of a later block's header (8 bytes) before a block 16 bytes shorter than
    that later one claims exactly up to the later block's length field, so its two lengths agree.
    Taken as one damaged block, its skip ran past the start of the later block and lost both
    blocks after it. Now a block found inside an unreadable one's extent makes it garbage up to there."""
    data = corpus("reader-pcapng-copied-header-agrees.pcapng").read_bytes()
    records, info = whole(data)
    assert [r[0] for r in records] == [(1_700_000_000 + i) * 10**9 for i in range(4)]
    assert [(i.kind, i.offset, i.bytes_skipped, i.record) for i in info.issues] == [
        ("garbage-between-blocks", 136, 8, 1)]
    without = data[:136] + data[144:]  # the same packets without the copied header
    assert records == whole(without)[0]


def test_f11_reproducer_is_what_it_says():
    records, _ = decode(corpus("stream-streamed-body-gap-bad-end.pcap.gz"))
    kinds = {(r["issue_kind"], r["detail"].split(":")[0]) for r in records if r["kind"] == "issue"}
    assert ("framing", "bad-frame-end") in kinds
    assert any(kind == "gap" and "inside a" in detail for kind, detail in kinds)


def test_corpus_files_are_tiny():
    for path in FILES:
        assert path.stat().st_size <= 4096, path.name
    assert struct.calcsize("<I") == 4


def test_f15_a_range_that_meets_an_interface_block_knows_the_ones_before_its_start():
    """F15, fixed: in a concatenated pcapng whose second section describes an interface, packets,
    then another interface, a range starting between the two numbered the one it read from 0, so
    its packets got the later interface's link type (the atheris reader harness found it). A range
    that reads an interface block now first learns those described before its start."""
    from tests.fuzz.corpus.build import epb, ether_frames, idb, shb
    frames = ether_frames(4)
    data = (shb() + idb(113) + epb(0, 10**6, frames[0]) + shb() + idb(1) + epb(0, 2 * 10**6, frames[1])
            + epb(0, 3 * 10**6, frames[2]) + idb(113) + epb(0, 4 * 10**6, frames[3]) + epb(1, 5 * 10**6, frames[3]))
    records, _ = whole(data)
    assert [r[1] for r in records] == [113, 1, 1, 1, 113]
    reads_as_whole_at_every_cut(data, records)
