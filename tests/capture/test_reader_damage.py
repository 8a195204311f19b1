"""Damaged captures, made from real samples: flipped bits in record headers and block lengths,
truncation at every byte, garbage between records, duplicated and dropped records, damaged gzip
streams, concatenated captures, files that are no capture.

For each: no exception but CaptureError escapes, nothing hangs, every record the damage did not
touch is still read (in order), and the damage is reported with where it starts and how many
bytes were skipped, so the file is not taken for a sound one."""

from __future__ import annotations

import gzip
import io
import random
import signal
import struct
import zlib

import pytest

from amqpcap.capture.readers import CaptureError, CaptureInfo, read_records
from amqpcap.capture.readers.boundaries import DAY, MAX_CAPLEN, MAX_ORIGLEN
from tests.helpers.captures import epb, frames, idb, pcap, record_spans, sample_bytes, shb
from tests.helpers.samples import SAMPLES

PCAP_SAMPLES = ["connection_errors.pcap", "confirms.pcap", "large_and_pipelined.pcap"]
FIELDS = {"seconds": 0, "sub-second": 4, "caplen": 8, "origlen": 12}


@pytest.fixture(autouse=True)
def no_hang():
    """A reader that loops forever fails the test instead of hanging the suite."""
    def expire(*_):
        raise TimeoutError("the reader did not finish in 120 s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def read(data: bytes) -> tuple[list, CaptureInfo]:
    info = CaptureInfo("mutant", len(data))
    return list(read_records("mutant", info, io.BytesIO(data))), info


def kept(records: list, original: list, lost: set[int] = frozenset()) -> bool:
    """Whether every original record but those in `lost` is among `records`, in order."""
    remaining = iter(records)
    return all(any(record == candidate for candidate in remaining)
               for i, record in enumerate(original) if i not in lost)


def sample(name: str) -> tuple[bytes, list, list[tuple[int, int]]]:
    data = sample_bytes(SAMPLES / name)
    records, info = read(data)
    assert info.ok
    return data, records, record_spans(data)


def flip(data: bytes, offset: int, bit: int) -> bytes:
    mutant = bytearray(data)
    mutant[offset] ^= 1 << bit
    return bytes(mutant)


# -- pcap record headers ---------------------------------------------------------------------------

def detectable(field: str, old: int, new: int, header: tuple[int, int, int, int], nano: bool, edge: bool) -> bool:
    sec, sub, caplen, origlen = header
    if field == "caplen":
        return True  # framing changes: the next header is out of place
    if field == "origlen":
        return new < caplen or new > MAX_ORIGLEN
    if field == "sub-second":
        return new > (10**9 if nano else 10**6)
    # a time is judged by its neighbours: the first and last records have one, and a jump of more
    # than a day next to them is what a quiet capture looks like
    return abs(new - old) > DAY and not edge


@pytest.mark.parametrize("name", PCAP_SAMPLES)
@pytest.mark.parametrize("field", FIELDS)
def test_a_flipped_bit_in_a_record_header_loses_that_record_at_most(name, field):
    data, original, spans = sample(name)
    nano = data[:4] == b"\x4d\x3c\xb2\xa1"
    rng = random.Random(f"{name}{field}")
    chosen = {1, 2, 3, len(spans) // 2, len(spans) - 2, len(spans) - 1} | set(rng.sample(range(len(spans)), 5))
    chosen = sorted(chosen)
    for k in chosen:
        start = spans[k][0]
        header = struct.unpack_from("<IIII", data, start)
        offset = start + FIELDS[field]
        old = header[FIELDS[field] // 4]
        for bit in range(32):
            new = old ^ (1 << bit)
            mutant = data[:offset] + struct.pack("<I", new) + data[offset + 4:]
            records, info = read(mutant)
            assert kept(records, original, {k}), (k, bit)
            if detectable(field, old, new, header, nano, k in (0, len(spans) - 1)):
                assert info.issues, (k, bit)
                first = info.issues[0]
                assert spans[k - 1][0] <= first.offset <= spans[k][1], (k, bit, first)
                assert first.bytes_skipped > 0 or first.kind in ("truncated-record",), (k, bit, first)
            if field == "caplen" and k < len(spans) - 1 and new <= MAX_CAPLEN:
                # the record is dropped, not handed out with the wrong bytes
                assert len(records) == len(original) - 1, (k, bit)
                (issue,) = info.issues
                assert (issue.kind, issue.offset, issue.end_offset) == \
                    ("damaged-record-header", start, spans[k][1])
                assert issue.bytes_skipped == spans[k][1] - start and issue.record == k


def test_record_3_of_1000_with_a_flipped_length_bit_loses_only_record_3():
    base = read(sample_bytes(SAMPLES / "connection_errors.pcap"))[0]
    records = [(1_700_000_000 * 10**9 + i * 1_000_000, base[i % len(base)][2]) for i in range(1000)]
    data = pcap(records)
    spans = record_spans(data)
    original, _ = read(data)
    assert len(original) == 1000
    for bit in range(32):
        records_read, info = read(flip(data, spans[3][0] + 8 + bit // 8, bit % 8))
        assert records_read == original[:3] + original[4:], bit
        assert [(i.kind, i.offset, i.end_offset, i.record) for i in info.issues] == \
            [("damaged-record-header", spans[3][0], spans[4][0], 3)], bit


@pytest.mark.parametrize("name", ["crafted/vlan_qinq.pcap", "ipv6_pcapng.pcapng"])
def test_truncated_at_every_byte(name):
    data, original, spans = sample(name)
    pcapng = name.endswith(".pcapng")
    header = spans[0][1] if pcapng else 24  # the section header block, the global header
    packet_spans = [span for span in spans if not pcapng or data[span[0]] == 6]
    for cut in range(len(data)):
        if cut < header:
            with pytest.raises(CaptureError):
                read(data[:cut])
            continue
        records, info = read(data[:cut])
        whole = sum(1 for _, end in packet_spans if end <= cut)
        assert records[:whole] == original[:whole], cut
        assert len(records) <= whole + 1, cut
        if len(records) > whole:  # the packet cut short, with what there is of it
            assert records[-1][:2] == original[whole][:2] and original[whole][2].startswith(records[-1][2]), cut
        at_boundary = cut in {end for _, end in spans} or cut == header
        assert info.ok == at_boundary, (cut, info.issues)
        assert {i.kind for i in info.issues} <= {"truncated-record", "truncated-file"}, (cut, info.issues)


GARBAGE = {
    "one byte": b"\x5a",
    "seven random": bytes(random.Random(7).randrange(256) for _ in range(7)),
    "100 random": bytes(random.Random(100).randrange(256) for _ in range(100)),
    "5000 random": bytes(random.Random(5000).randrange(256) for _ in range(5000)),
    "zeros": bytes(4096),
    "ones": b"\xff" * 64,
    "text": b"this is not a record header, it is a log line that got into the file\n" * 3,
    "a record header alone": None,  # filled in per sample: the header of another record
}


@pytest.mark.parametrize("name", ["connection_errors.pcap", "confirms.pcap", "ipv6_pcapng.pcapng"])
@pytest.mark.parametrize("kind", GARBAGE)
def test_garbage_between_records_is_skipped_exactly(name, kind):
    data, original, spans = sample(name)
    garbage = GARBAGE[kind] or data[spans[5][0]:spans[5][0] + 16]
    for k in (2, 3, len(spans) // 2, len(spans) - 1):
        at = spans[k][0]
        records, info = read(data[:at] + garbage + data[at:])
        assert records == original, (k, info.issues)
        (issue,) = info.issues
        assert (issue.offset, issue.end_offset, issue.bytes_skipped) == (at, at + len(garbage), len(garbage)), k
        assert issue.kind in ("damaged-record-header", "garbage-between-blocks")
    # appended at the end
    records, info = read(data + garbage)
    if kind == "a record header alone" and name.endswith(".pcap"):  # a file cut right after a record header
        assert records[:-1] == original and records[-1][2] == b""
        assert [(i.kind, i.offset) for i in info.issues] == [("truncated-record", len(data))]
    else:
        assert records == original
        assert [(i.offset, i.bytes_skipped) for i in info.issues] == [(len(data), len(garbage))]


@pytest.mark.parametrize("name", ["connection_errors.pcap", "ipv6_pcapng.pcapng"])
def test_duplicated_and_dropped_records_are_read_as_they_are(name):
    data, original, spans = sample(name)
    packets = [i for i, (s, _) in enumerate(spans) if name.endswith(".pcap") or data[s] == 6]
    k = packets[len(packets) // 2]
    (s, e) = spans[k]
    duplicated, info = read(data[:e] + data[s:e] + data[e:])
    assert info.ok and len(duplicated) == len(original) + 1 and kept(duplicated, original)
    dropped, info = read(data[:s] + data[e:])
    assert info.ok and len(dropped) == len(original) - 1 and kept(original, dropped)


# -- pcapng blocks ---------------------------------------------------------------------------------

def test_a_flipped_bit_in_a_block_length_loses_that_block_at_most():
    data, original, spans = sample("ipv6_pcapng.pcapng")
    packet_index = {}
    for i, (s, _) in enumerate(spans):
        if data[s] == 6:
            packet_index[i] = len(packet_index)
    for k in (3, 4, 5, len(spans) // 2, len(spans) - 3):
        for field in (4, None):  # the leading length, then the trailing one
            offset = spans[k][0] + 4 if field else spans[k][1] - 4
            for bit in range(32):
                records, info = read(flip(data, offset + bit // 8, bit % 8))
                lost = {packet_index[k]} if k in packet_index else set()
                assert kept(records, original, lost), (k, field, bit)
                assert info.issues, (k, field, bit)
                # seen at the damaged block, or at the next one when the new length happens to
                # land on a copy of itself (the next block's length field)
                assert spans[k][0] <= info.issues[0].offset < spans[k + 1][1], (k, field, bit, info.issues)


# -- gzip ------------------------------------------------------------------------------------------

def decompressed_prefix(compressed: bytes) -> bytes:
    """What can be decompressed of a damaged gzip stream, byte by byte (independently of the reader)."""
    inflate, out = zlib.decompressobj(31), []
    for i in range(len(compressed)):
        try:
            out.append(inflate.decompress(compressed[i:i + 1]))
        except zlib.error:
            break
    return b"".join(out)


@pytest.mark.parametrize("name", ["connection_errors.pcap", "ipv6_pcapng.pcapng"])
def test_a_truncated_gzip_member_keeps_what_was_decompressed(name):
    data, original, spans = sample(name)
    compressed = gzip.compress(data)
    cuts = {len(compressed) * f // 10 for f in range(1, 10)} | {len(compressed) - 1, len(compressed) - 8}
    for cut in sorted(cuts):
        records, info = read(compressed[:cut])
        available = len(decompressed_prefix(compressed[:cut]))
        whole = sum(1 for s, e in spans if e <= available and (name.endswith(".pcap") or data[s] == 6))
        assert records[:whole] == original[:whole] and len(records) <= whole + 1, cut
        kinds = [issue.kind for issue in info.issues]
        assert kinds[0] == "gzip-damaged", (cut, kinds)
        assert info.issues[0].offset == available
    records, info = read(compressed + b"garbage after the member")
    assert records == original and [i.kind for i in info.issues] == ["gzip-damaged"]
    records, info = read(compressed + bytes(100))  # zero padding, as some writers leave
    assert records == original and info.ok
    records, info = read(compressed + compressed)  # two members: one stream
    assert records == original + original


@pytest.mark.parametrize("name", ["connection_errors.pcap", "ipv6_pcapng.pcapng"])
def test_a_corrupt_gzip_byte_keeps_what_came_before(name):
    data, original, spans = sample(name)
    compressed = gzip.compress(data)
    for at in (len(compressed) * 3 // 10, len(compressed) // 2, len(compressed) * 8 // 10):
        for value in (0x00, 0xFF, compressed[at] ^ 0x10):
            mutant = compressed[:at] + bytes([value]) + compressed[at + 1:]
            if mutant == compressed:
                continue
            records, info = read(mutant)
            good = decompressed_prefix(mutant)
            same = next((i for i, (a, b) in enumerate(zip(good, data)) if a != b), min(len(good), len(data)))
            whole = sum(1 for s, e in spans if e <= same and (name.endswith(".pcap") or data[s] == 6))
            assert records[:whole] == original[:whole], (at, value)
            assert "gzip-damaged" in [issue.kind for issue in info.issues], (at, value)


# -- times no 64-bit nanosecond clock holds -------------------------------------------------------

NEVER = 2**64 - 1  # ticks: at ns resolution, past 2262


def test_a_packet_time_beyond_64_bit_nanoseconds_is_reported_and_the_packet_kept_with_the_last_time():
    """A pcapng timestamp that damage, or its interface's resolution or offset, puts beyond what
    64-bit nanoseconds since 1970 hold: reported where it is (`unreadable-time`), the packet kept
    with the previous packet's time (none before it: 0), whether the hot loop meets it, a block
    after another kind of block, the cut end of the file, or a byte range."""
    d = frames(5)
    head = shb() + idb(1, tsresol=9)
    blocks = [epb(0, 10**18, d[0]), epb(0, NEVER, d[1]), epb(0, 10**18 + 5, d[2])]
    records, info = read(head + b"".join(blocks))
    assert records == [(10**18, 1, d[0]), (10**18, 1, d[1]), (10**18 + 5, 1, d[2])]
    at = len(head) + len(blocks[0])
    assert [(i.kind, i.record, i.offset, i.end_offset, i.bytes_skipped) for i in info.issues] == \
        [("unreadable-time", 1, at, at + len(blocks[1]), 0)]
    assert "18446744073709551615" in info.issues[0].detail and info.last_ts_ns == 10**18 + 5

    after_idb = head + epb(0, 10**18, d[0]) + idb(1, tsresol=9) + epb(0, NEVER, d[1])  # the slow path
    assert read(after_idb)[0] == [(10**18, 1, d[0]), (10**18, 1, d[1])]
    cut = head + epb(0, 10**18, d[0]) + epb(0, NEVER, d[1])[:-12]  # the last block, cut in its packet
    records, info = read(cut)
    assert [r[0] for r in records] == [10**18, 10**18]
    assert [i.kind for i in info.issues] == ["truncated-record", "unreadable-time"]

    for interface in (idb(1, tsresol=0), idb(1, tsoffset=2**62)):  # every time: seconds taken for ticks, a wild offset
        records, info = read(shb() + interface + b"".join(epb(0, 10**15 + i, d[i]) for i in range(3)))
        assert records == [(0, 1, d[i]) for i in range(3)]
        assert [i.kind for i in info.issues] == ["unreadable-time"] * 3

    data = head + b"".join(blocks)
    whole = read(data)
    ranged, infos = [], []
    for start, end in ((0, at + 3), (at + 3, len(data))):
        info = CaptureInfo("mutant", len(data))
        ranged += read_records("mutant", info, io.BytesIO(data), start=start, end=end)
        infos.append(info)
    assert ranged == whole[0]
    assert [i.kind for info in infos for i in info.issues] == ["unreadable-time"]


def test_a_time_beyond_64_bit_nanoseconds_does_not_stop_the_decoding(tmp_path):
    """The decoder (compiled, it holds times in 64 bits) gets the packet with a time it can hold:
    every frame of the capture is still decoded, and the damage is an issue record of its file."""
    from amqpcap.connection.decoder import CaptureDecoder
    original = sample_bytes(SAMPLES / "ipv6_pcapng.pcapng")
    packets = [start for start, _ in record_spans(original) if original[start:start + 4] == b"\x06\0\0\0"]
    assert len(packets) > 10  # enhanced packet blocks (the sample is little-endian)
    mutant = bytearray(original)
    start = packets[len(packets) // 2]  # a packet in the middle: its timestamp's high word
    mutant[start + 12:start + 16] = b"\xff\xff\xff\xff"
    path = tmp_path / "mutant.pcapng"
    path.write_bytes(bytes(mutant))
    before = [r for r in CaptureDecoder().decode([str(SAMPLES / "ipv6_pcapng.pcapng")]) if r["kind"] != "issue"]
    records = list(CaptureDecoder().decode([str(path)]))
    issues = [r for r in records if r["kind"] == "issue"]
    assert [(r["issue_kind"], r["capture"], r["file_offset"]) for r in issues] == \
        [("unreadable-time", str(path), start)]
    assert [(r["kind"], r.get("method"), r["offset"]) for r in records if r["kind"] != "issue"] == \
        [(r["kind"], r.get("method"), r["offset"]) for r in before]


# -- concatenated and foreign files ----------------------------------------------------------------

def test_concatenated_captures_are_read_through():
    first = sample_bytes(SAMPLES / "connection_errors.pcap")
    for second_name in ("heartbeats.pcap", "confirms.pcap", "crafted/linux_sll.pcap", "concurrent.pcap"):
        second = sample_bytes(SAMPLES / second_name)
        records, info = read(first + second)
        assert records == read(first)[0] + read(second)[0], second_name
        assert [(i.kind, i.offset, i.bytes_skipped) for i in info.issues] == \
            [("concatenated-capture", len(first), 0)], second_name
    big_endian = pcap([(10**18 + i * 1000, d) for i, d in enumerate(frames(20))], order=">", link_type=113)
    records, info = read(first + big_endian)
    assert records == read(first)[0] + read(big_endian)[0]
    assert info.link_types == {1, 113} and [i.kind for i in info.issues] == ["concatenated-capture"]
    first_ng = sample_bytes(SAMPLES / "ipv6_pcapng.pcapng")
    second_ng = shb(">") + idb(101, order=">") + \
        b"".join(epb(0, 10**15 + i, d, ">") for i, d in enumerate(frames(5)))
    records, info = read(first_ng + second_ng)
    assert records == read(first_ng)[0] + read(second_ng)[0]
    assert [(i.kind, i.offset) for i in info.issues] == [("concatenated-capture", len(first_ng))]


@pytest.mark.parametrize("content", [
    b"", b"this is not a capture\n" * 10, bytes(1000), b"\x7fELF\x02\x01\x01" + bytes(100),
    bytes(random.Random(3).randrange(256) for _ in range(3000)), b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00",
    gzip.compress(b"a compressed text, no capture" * 20), gzip.compress(b"x" * 100)[:6],
    b"\x0a\x0d\x0d\x0a" + bytes(40)],
    ids=["empty", "text", "zeros", "elf", "random", "cut pcap header", "gzip text", "cut gzip header",
         "damaged section header"])
def test_a_file_that_is_no_capture_raises_capture_error(content, tmp_path):
    with pytest.raises(CaptureError):
        read_records("mutant", None, io.BytesIO(content))  # at once, before the first record
    path = tmp_path / "file.pcap"
    path.write_bytes(content)
    with pytest.raises(CaptureError, match="not a pcap or pcapng capture"):
        read_records(str(path))
