"""What the samples do not hold: every pcapng packet block kind, timestamp resolutions and offsets,
both byte orders, sections, blocks to skip, and the quirks of pcap writers. Compared with Scapy's
raw readers where Scapy reads the same thing, and with the pcapng specification where it does not."""

from __future__ import annotations

import io
import struct

import pytest
from scapy.utils import RawPcapNgReader, RawPcapReader

from amqpcap.capture.readers import CaptureInfo, read_records
from tests.helpers.captures import block, epb, frames, idb, isb, option, packet_block, pcap, shb, spb

T0 = 1_700_000_000 * 10**9


def read(data: bytes) -> tuple[list, CaptureInfo]:
    info = CaptureInfo("built", len(data))
    return list(read_records("built", info, io.BytesIO(data))), info


def scapy(data: bytes) -> list:
    """Scapy's records: (ts_ns, link type, data), None for a time it does not give."""
    pcapng = data[:4] == b"\x0a\x0d\x0d\x0a"
    reader = RawPcapNgReader(io.BytesIO(data)) if pcapng else RawPcapReader(io.BytesIO(data))
    out = []
    while True:
        try:
            record, meta = reader._read_packet(size=1 << 18)
        except EOFError:
            return out
        if isinstance(reader, RawPcapNgReader):
            ts = None if meta.tshigh is None else ((meta.tshigh << 32) | meta.tslow) * 10**9 // meta.tsresol
            out.append((ts, meta.linktype, record))
        else:
            out.append((meta.sec * 10**9 + meta.usec * (1 if reader.nano else 1000), reader.linktype, record))


@pytest.mark.parametrize("order", ["<", ">"])
def test_pcapng_packet_blocks_of_every_kind(order):
    packets = frames(12)
    data = b"".join([shb(order), idb(1, 1500, order=order), idb(113, 96, tsresol=9, order=order),
                     epb(0, T0 // 1000, packets[0], order), epb(1, T0 + 5, packets[1], order),
                     packet_block(0, T0 // 1000 + 7, packets[2], order),
                     packet_block(1, T0 + 9, packets[3], order),
                     spb(packets[4], order=order), spb(packets[5][:40], origlen=4000, order=order),
                     epb(0, T0 // 1000 + 11, packets[6], order)])
    records, info = read(data)
    reference = scapy(data)
    assert [r[1:] for r in records] == [r[1:] for r in reference]
    # Simple Packet Blocks carry no time: they get the previous packet's (Scapy gives None)
    assert [r[0] for r in records] == [r[0] if r[0] is not None else records[i - 1][0]
                                      for i, r in enumerate(reference)]
    assert records[5][2] == packets[5][:40]  # an SPB holds min(origlen, snaplen) bytes
    assert info.ok and info.link_types == {1, 113} and info.resolutions == {10**6, 10**9}


def test_simple_packet_block_with_snaplen_zero_keeps_the_whole_packet():
    """snaplen 0 means no limit (pcapng spec); Scapy cuts such packets to nothing."""
    packet = frames(1)[0]
    data = shb() + idb(1, 0) + spb(packet)
    assert read(data)[0] == [(0, 1, packet)]
    assert scapy(data)[0][2] == b""


@pytest.mark.parametrize("tsresol, resolution", [(6, 10**6), (9, 10**9), (3, 10**3), (0x80 | 20, 2**20),
                                                 (0x80 | 30, 2**30), (0x80 | 10, 2**10), (0, 1)])
def test_timestamp_resolutions_as_scapy_computes_them(tsresol, resolution):
    packets = frames(4)
    ticks = [(T0 // 10**9) * resolution + i * 12345 for i in range(4)]
    data = shb() + idb(1, tsresol=tsresol) + b"".join(epb(0, t, p) for t, p in zip(ticks, packets))
    records, info = read(data)
    assert records == scapy(data)
    assert [r[0] for r in records] == [t * 10**9 // resolution for t in ticks]
    assert info.resolutions == {resolution}


def test_timestamp_offsets_are_added():
    """if_tsoffset (seconds) is added to every time of its interface (Scapy ignores it)."""
    data = shb() + idb(1, tsresol=9, tsoffset=3600) + idb(1, tsresol=6, tsoffset=-60) + \
        epb(0, 1000, b"a" * 60) + epb(1, 2000, b"b" * 60)
    records, _ = read(data)
    assert [r[0] for r in records] == [3600 * 10**9 + 1000, -60 * 10**9 + 2000 * 1000]


def test_blocks_that_hold_no_packet_are_skipped():
    nrb = block(4, struct.pack("<HH", 1, 8) + b"\x7f\x00\x00\x01host" + struct.pack("<HH", 0, 0))
    dsb = block(10, struct.pack("<II", 0x544C534B, 5) + b"keys\n")
    custom = block(0x00000BAD, struct.pack("<I", 32473) + b"vendor data")
    apple = block(0x80000001, struct.pack("<I", 42))
    packets = frames(3)
    data = shb() + idb(1) + nrb + epb(0, 1, packets[0]) + dsb + custom + epb(0, 2, packets[1]) + apple + isb() + \
        epb(0, 3, packets[2]) + isb()
    records, info = read(data)
    assert [r[2] for r in records] == packets and info.ok


def test_sections_each_have_their_byte_order_and_interfaces():
    packets = frames(4)
    first = shb("<") + idb(1) + epb(0, 10, packets[0]) + epb(0, 11, packets[1])
    second = shb(">") + idb(113, tsresol=9, order=">") + epb(0, 12, packets[2], ">") + epb(0, 13, packets[3], ">")
    records, info = read(first + second)
    assert records == [(10_000, 1, packets[0]), (11_000, 1, packets[1]),
                       (12, 113, packets[2]), (13, 113, packets[3])]
    assert [(i.kind, i.offset) for i in info.issues] == [("concatenated-capture", len(first))]


def test_a_packet_of_an_undescribed_interface_is_skipped_and_reported():
    packets = frames(3)
    data = shb() + idb(1) + epb(0, 1, packets[0]) + epb(3, 2, packets[1]) + epb(0, 3, packets[2])
    records, info = read(data)
    assert [r[2] for r in records] == [packets[0], packets[2]]
    assert [(i.kind, i.record) for i in info.issues] == [("unknown-interface", 1)]
    assert [r[2] for r in scapy(data)] == [packets[0], packets[2]]  # Scapy skips it silently


def test_a_block_whose_content_contradicts_its_length_is_skipped_and_reported():
    packets = frames(3)
    bad = bytearray(epb(0, 2, packets[1]))
    struct.pack_into("<I", bad, 20, len(bad) + 100)  # caplen: more than the block holds
    data = shb() + idb(1) + epb(0, 1, packets[0]) + bytes(bad) + epb(0, 3, packets[2])
    records, info = read(data)
    assert [r[2] for r in records] == [packets[0], packets[2]]
    offset = len(shb() + idb(1) + epb(0, 1, packets[0]))
    assert [(i.kind, i.offset, i.bytes_skipped) for i in info.issues] == [("damaged-block", offset, len(bad))]


def test_idb_options_the_reader_does_not_use_are_skipped():
    options = option(2, b"eth0") + option(3, b"an interface with a long description") + \
        option(9, bytes([9])) + option(11, b"\x00tcp port 5672") + option(0, b"")
    data = shb() + block(1, struct.pack("<HHI", 1, 0, 262144) + options) + epb(0, 5, b"x" * 64)
    assert read(data)[0] == scapy(data) == [(5, 1, b"x" * 64)]


# -- pcap writers --------------------------------------------------------------------------------

@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nano", [False, True])
def test_pcap_byte_orders_and_precisions(order, nano):
    packets = frames(20)
    data = pcap([(T0 + i * 1_234_567, p) for i, p in enumerate(packets)], order=order, nano=nano, link_type=113)
    records, info = read(data)
    assert records == scapy(data) and len(records) == 20 and info.ok
    assert info.format == ("pcap-ns" if nano else "pcap") and info.link_types == {113}


def _records_with(lengths: list[tuple[int, int]], usec: list[int] | None = None, snaplen: int = 262144) -> bytes:
    """A pcap whose records have the given (caplen, origlen) and sub-second fields."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1)]
    for i, (caplen, origlen) in enumerate(lengths):
        sub = usec[i] if usec else i * 1000
        out.append(struct.pack("<IIII", 1_700_000_000 + i, sub, caplen, origlen) + bytes([i % 256]) * caplen)
    return b"".join(out)


def test_a_writer_whose_origlen_is_below_caplen_is_read_whole():
    """Some writers put 0, or less than caplen, in origlen: learnt from the first records (two
    that do, or a file of one record)."""
    for lengths in ([(60, 0)] * 30, [(100, 60)] * 30, [(60, 0), (70, 70), (80, 0)] * 10,
                    [(70, 70), (60, 0), (70, 70)] * 10, [(60, 0)]):
        data = _records_with(lengths)
        records, info = read(data)
        assert records == scapy(data) and len(records) == len(lengths) and info.ok, lengths


def test_one_record_below_its_caplen_at_the_start_is_damage_not_a_writer():
    """One first record with origlen < caplen among good ones keeps the origlen rule (fuzz
    finding F6): the record is reported as damage and the rest is read as written."""
    data = _records_with([(60, 59)] + [(60 + i, 60 + i) for i in range(1, 12)])
    records, info = read(data)
    assert records == scapy(data)[1:] and [i.kind for i in info.issues] == ["damaged-record-header"], info.issues


def test_records_longer_than_the_snaplen_and_rounded_microseconds():
    """Writers that put 65535 (or 0) in the header and write longer loopback records, and those
    that round 999999.6 us up to 1000000."""
    lengths = [(65549, 65549), (200, 200), (65549, 65549), (100, 100)] * 3
    for snaplen in (65535, 0):
        data = _records_with(lengths, snaplen=snaplen)
        records, info = read(data)
        assert records == scapy(data) and len(records) == 12 and info.ok
    data = _records_with([(60, 60)] * 5, usec=[0, 999_999, 1_000_000, 5, 1_000_000])
    records, info = read(data)
    assert records == scapy(data) and info.ok


def test_empty_records_and_empty_files():
    data = _records_with([(0, 60), (60, 60), (0, 1514), (70, 70)])
    records, info = read(data)
    assert records == scapy(data) and info.ok
    records, info = read(pcap([]))
    assert records == [] and info.ok and info.records == 0
    records, info = read(shb() + idb(1))
    assert records == [] and info.ok


def test_quiet_captures_may_jump_more_than_a_day():
    """A capture that stays open over a weekend: the jump is confirmed by the records after it."""
    packets = frames(10)
    times = [T0 + i * 10**9 for i in range(5)] + [T0 + 3 * 86_400 * 10**9 + i * 10**9 for i in range(5)]
    data = pcap(list(zip(times, packets)))
    records, info = read(data)
    assert records == scapy(data) and info.ok
