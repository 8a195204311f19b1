"""Capture bytes for the reader tests: the samples (decompressed), where their records start (found
with a few lines of struct, independently of the reader), and builders for pcap and pcapng
files with the features and damage the samples do not have."""

from __future__ import annotations

import gzip
import io
import struct
from pathlib import Path

from tests.helpers.samples import SAMPLES

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz")
ALL_SAMPLES = sorted(p for p in SAMPLES.rglob("*") if p.name.endswith(CAPTURE_SUFFIXES))
UNCOMPRESSED = [p for p in ALL_SAMPLES if not p.name.endswith(".gz")]


def sample_id(path: Path) -> str:
    return str(path.relative_to(SAMPLES))


def sample_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def record_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of every record of an undamaged pcap, or block of a pcapng."""
    spans = []
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        order = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
        p = 0
        while p + 12 <= len(data):
            length = struct.unpack_from(order + "I", data, p + 4)[0]
            spans.append((p, p + length))
            p += length
        return spans
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    p = 24
    while p + 16 <= len(data):
        caplen = struct.unpack_from(order + "I", data, p + 8)[0]
        spans.append((p, min(p + 16 + caplen, len(data))))
        p += 16 + caplen
    return spans


class NonSeekable(io.RawIOBase):
    """A pipe's worth of bytes: reads only, in small pieces, and cannot seek."""

    def __init__(self, data: bytes, piece: int = 4096) -> None:
        self.data, self.position, self.piece = data, 0, piece

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        size = min(len(buffer), self.piece, len(self.data) - self.position)
        buffer[:size] = self.data[self.position:self.position + size]
        self.position += size
        return size


def pipe(data: bytes) -> io.BufferedReader:
    return io.BufferedReader(NonSeekable(data))


# -- pcap ----------------------------------------------------------------------------------------

def pcap(records: list[tuple[int, bytes]], order: str = "<", nano: bool = False, link_type: int = 1,
         snaplen: int = 262144) -> bytes:
    """A pcap of (ts_ns, data) records."""
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, link_type)]
    for ts, data in records:
        sub = ts % 10**9 if nano else ts % 10**9 // 1000
        out.append(struct.pack(order + "IIII", ts // 10**9, sub, len(data), len(data)) + data)
    return b"".join(out)


# -- pcapng --------------------------------------------------------------------------------------

def _pad(data: bytes) -> bytes:
    return data + b"\x00" * (-len(data) % 4)


def block(block_type: int, body: bytes, order: str = "<") -> bytes:
    body = _pad(body)
    length = 12 + len(body)
    return struct.pack(order + "II", block_type, length) + body + struct.pack(order + "I", length)


def option(code: int, value: bytes, order: str = "<") -> bytes:
    return struct.pack(order + "HH", code, len(value)) + _pad(value)


def shb(order: str = "<") -> bytes:
    return block(0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1), order)


def idb(link_type: int = 1, snaplen: int = 262144, tsresol: int | None = None, tsoffset: int | None = None,
        order: str = "<") -> bytes:
    options = b""
    if tsresol is not None:
        options += option(9, bytes([tsresol]), order)
    if tsoffset is not None:
        options += option(14, struct.pack(order + "q", tsoffset), order)
    if options:
        options += option(0, b"", order)
    return block(1, struct.pack(order + "HHI", link_type, 0, snaplen) + options, order)


def epb(interface: int, ticks: int, data: bytes, order: str = "<") -> bytes:
    return block(6, struct.pack(order + "IIIII", interface, ticks >> 32, ticks & 0xFFFFFFFF, len(data),
                                len(data)) + data, order)


def spb(data: bytes, origlen: int | None = None, order: str = "<") -> bytes:
    return block(3, struct.pack(order + "I", len(data) if origlen is None else origlen) + data, order)


def packet_block(interface: int, ticks: int, data: bytes, order: str = "<") -> bytes:
    """The obsolete Packet Block (type 2)."""
    return block(2, struct.pack(order + "HHIIII", interface, 0, ticks >> 32, ticks & 0xFFFFFFFF, len(data),
                                len(data)) + data, order)


def isb(interface: int = 0, order: str = "<") -> bytes:
    return block(5, struct.pack(order + "III", interface, 0, 0), order)


def frames(count: int, size: int = 60, seed: int = 1) -> list[bytes]:
    """Packet bytes that look like Ethernet frames: different lengths and contents."""
    out = []
    for i in range(count):
        length = size + (i * 37 + seed) % 200
        out.append(bytes((i * 7 + j * 13 + seed) % 256 for j in range(length)))
    return out
