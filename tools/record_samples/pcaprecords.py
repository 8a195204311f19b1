"""Just enough of a pcap reader for the recorder's own bookkeeping (long_connection's cut points):
classic pcap, Ethernet (loopback), IPv4, TCP. It maps TCP payload bytes to record numbers; it
knows nothing about AMQP."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Segment:
    index: int        # 0-based record number in the file
    ts: float         # seconds
    sport: int
    dport: int
    seq: int
    flags: int
    payload: bytes


def read_segments(path: Path) -> list[Segment]:
    data = Path(path).read_bytes()
    magic = struct.unpack_from("<I", data, 0)[0]
    if magic == 0xA1B2C3D4:
        div = 1e6
    elif magic == 0xA1B23C4D:
        div = 1e9
    else:
        raise ValueError(f"{path}: not a little-endian classic pcap")
    linktype = struct.unpack_from("<I", data, 20)[0]
    if linktype != 1:
        raise ValueError(f"{path}: link type {linktype}, only EN10MB is handled")
    out, pos, index = [], 24, 0
    while pos < len(data):
        sec, frac, incl, _orig = struct.unpack_from("<IIII", data, pos)
        pkt = data[pos + 16:pos + 16 + incl]
        pos += 16 + incl
        if struct.unpack_from(">H", pkt, 12)[0] != 0x0800:
            raise ValueError(f"record {index}: not IPv4")
        ip = pkt[14:]
        ihl = (ip[0] & 0x0F) * 4
        total = struct.unpack_from(">H", ip, 2)[0]
        if ip[9] != 6:
            raise ValueError(f"record {index}: not TCP")
        tcp = ip[ihl:total]
        sport, dport, seq = struct.unpack_from(">HHI", tcp, 0)
        off = (tcp[12] >> 4) * 4
        out.append(Segment(index, sec + frac / div, sport, dport, seq, tcp[13], bytes(tcp[off:])))
        index += 1
    return out


def record_count(path: Path) -> int:
    return len(read_segments(path))


def write_records(src: Path, dst: Path, start: int, stop: int | None) -> int:
    """Copy records [start, stop) of a classic pcap (same header) to dst; returns how many."""
    data = Path(src).read_bytes()
    chunks, pos, index = [data[:24]], 24, 0
    while pos < len(data):
        incl = struct.unpack_from("<I", data, pos + 8)[0]
        if index >= start and (stop is None or index < stop):
            chunks.append(data[pos:pos + 16 + incl])
        pos += 16 + incl
        index += 1
    Path(dst).write_bytes(b"".join(chunks))
    return len(chunks) - 1
