"""Link, IP and TCP headers, sliced with struct (Scapy's dissection is ~100x slower).

Link types: Ethernet (802.1Q / 802.1ad / QinQ tags), Linux cooked v1 and v2, BSD loopback (NULL,
either byte order) and LOOP, raw IPv4/IPv6. IPv4 with options; IPv6 with extension headers.
IP fragments are reassembled (both versions); what never completes is counted at the end.
Everything that is not TCP over IP is counted by reason, never an error.
"""

from __future__ import annotations

import struct

# (_socket: the C module that socket wraps; importing socket costs every start a millisecond)
from _socket import AF_INET, AF_INET6, inet_ntop, inet_pton
from array import array
from collections import Counter

_ETHER_TYPE = struct.Struct(">H").unpack_from
_IPV4 = struct.Struct(">BBHHHBBH4s4s").unpack_from
_IPV6 = struct.Struct(">IHBB16s16s").unpack_from
_NULL_LE = struct.Struct("<I").unpack_from
_NULL_BE = struct.Struct(">I").unpack_from

ETHERTYPE_IPV4, ETHERTYPE_IPV6 = 0x0800, 0x86DD
VLAN_TAGS = {0x8100, 0x88A8, 0x9100}
IPPROTO_TCP, IPPROTO_FRAGMENT = 6, 44
IPV6_EXTENSIONS = {0, 43, 60, 51, 135, 139, 140}  # hop-by-hop, routing, dest opts, AH, mobility, HIP, shim6
BSD_AF_INET6 = {24, 28, 30}  # AF_INET6 on NetBSD/OpenBSD, FreeBSD, macOS

TCP_FIN, TCP_SYN, TCP_RST, TCP_ACK = 0x01, 0x02, 0x04, 0x10
# Compiled, this module is an extension file (amqpcap.columnar.arrow_layout says why it is told so)
COMPILED = __file__.endswith((".so", ".pyd"))


class Segment:
    """One TCP segment: what reassembly needs of a packet."""

    __slots__ = ("ts_ns", "src", "sport", "dst", "dport", "seq", "ack", "flags", "payload", "record", "stream", "at",
                 "size")

    def __init__(self, ts_ns: int, src: bytes, sport: int, dst: bytes, dport: int, seq: int, ack: int, flags: int,
                 payload: bytes) -> None:
        self.ts_ns = ts_ns
        self.src = src  # packed address (4 or 16 bytes)
        self.sport = sport
        self.dst = dst
        self.dport = dport
        self.seq = seq
        self.ack = ack
        self.flags = flags
        self.payload = payload
        # Where Wireshark shows it, set by whoever numbers the file's packets: the pcap record number
        # (frame.number, from 1; 0 unknown) and the file's TCP stream index (tcp.stream; -1 unknown).
        self.record = 0
        self.stream = -1
        # Where the payload lies in its capture file, when the parser was told the record's offset
        # (PacketParser.parse): `size` bytes from offset `at`, and `payload` is then left empty.
        # -1: the payload is in `payload` (`size` is its length).
        self.at = -1
        self.size = len(payload)

    def __repr__(self) -> str:
        return (f"Segment({self.ts_ns}, {format_endpoint(self.src, self.sport)} > "
                f"{format_endpoint(self.dst, self.dport)}, seq={self.seq}, flags={self.flags:#x}, "
                f"{self.size} bytes{'' if self.at < 0 else f' at offset {self.at}'})")

    def __eq__(self, other) -> bool:
        return isinstance(other, Segment) and all(getattr(self, f) == getattr(other, f) for f in self.__slots__)


def segments_from_packed(packed: list, base: int, streams: list, capture=None) -> list:
    """packed_columns' inverse: the segments of SEGMENT_COLUMNS packed as packed_columns packs them
    (machine integer arrays, or any buffer of them such as an Arrow buffer's memoryview; (offsets,
    data) per bytes column), each numbered where the file shows it: pcap record `base + record[i] +
    1`, TCP stream `streams[stream[i]]` (-1 where the map ends: not numbered). A payload staged as
    a place in the capture (`at` >= 0) is copied from `capture`, the capture file's bytes (any
    buffer: a memory map), so every segment made holds its payload. What the Spark job's decode
    stage makes of a staged batch: compiled, every field goes from the buffers into the segment in
    C, with no Python object per value on the way."""
    ts, record, stream, src, sport, dst, dport, seq, ack, flags, payload, at, size = packed
    src_end, src_data = src
    dst_end, dst_data = dst
    payload_end, payload_data = payload
    n = len(ts)
    known = len(streams)
    whole = len(capture) if capture is not None else -1
    addresses = [b""] * _ADDRESS_SLOTS
    out = []
    for i in range(n):
        segment = Segment.__new__(Segment)  # (compiled: no __init__ call; every field is set here)
        segment.ts_ns = ts[i]
        segment.src = _known_address(src_data, src_end[i], src_end[i + 1], addresses)
        segment.sport = sport[i]
        segment.dst = _known_address(dst_data, dst_end[i], dst_end[i + 1], addresses)
        segment.dport = dport[i]
        segment.seq = seq[i]
        segment.ack = ack[i]
        segment.flags = flags[i]
        start = at[i]
        if start < 0:
            segment.payload = _bytes_of(payload_data, payload_end[i], payload_end[i + 1])
        else:
            stop = start + size[i]
            if stop > whole or stop < start:
                raise ValueError(f"a staged payload lies at bytes {start}:{stop} of its capture, which has "
                                 + ("no bytes given" if whole < 0 else f"{whole}: the file has changed since it was read"))
            segment.payload = _bytes_in(capture, start, stop) if stop > start else b""
        segment.at = -1
        segment.size = len(segment.payload)
        segment.record = base + record[i] + 1
        local = stream[i]
        segment.stream = streams[local] if 0 <= local < known else -1
        out.append(segment)
    return out


def _bytes_of(data: bytes, start: int, stop: int) -> bytes:
    """data[start:stop], which must lie within data."""
    if not 0 <= start <= stop <= len(data):
        raise ValueError(f"bytes {start}:{stop} of {len(data)}: the offsets do not fit the data")
    if COMPILED:  # (C functions packets.pxd declares: one copy, no slice object)
        return PyBytes_FromStringAndSize(PyBytes_AS_STRING(data) + start, stop - start)  # noqa: F821
    return data[start:stop]


def _known_address(data: bytes, start: int, stop: int, known: list) -> bytes:
    """data[start:stop], an address, as the very bytes object made the last time it was met, unless
    another address with the same last byte (low 6 bits) came since (`known`: the last address met
    per slot). A capture holds few addresses at a time (a broker's, its clients'): lookups keyed by
    an address then hash it once (bytes keep their hash) and find their key by identity, and most
    packets make no address object."""
    if not 0 <= start < stop <= len(data):
        return _bytes_of(data, start, stop)  # (empty, or offsets that do not fit: it raises)
    slot = data[stop - 1] & (_ADDRESS_SLOTS - 1)
    cached = known[slot]
    if COMPILED:  # (memcmp, PyBytes_AS_STRING: C functions packets.pxd declares)
        if len(cached) == stop - start and \
                memcmp(PyBytes_AS_STRING(data) + start, PyBytes_AS_STRING(cached), stop - start) == 0:  # noqa: F821
            return cached
    elif data[start:stop] == cached:
        return cached
    address = _bytes_of(data, start, stop)
    known[slot] = address
    return address


def _bytes_in(buffer, start: int, stop: int) -> bytes:
    """buffer[start:stop] as bytes; the caller has checked 0 <= start < stop <= len(buffer)."""
    if COMPILED:  # (packets.pxd's C function, over the typed view: one copy)
        return _view_bytes(buffer, start, stop)  # noqa: F821
    return bytes(buffer[start:stop])


_ADDRESS_SLOTS = 64  # _known_address: a power of two
_MAX_OFFSET = 0x7FFFFFFF  # Arrow's binary type: 32-bit offsets


def packed_columns(segments: list) -> list:
    """Segments packed the way Arrow lays columns out (segments_from_packed is the inverse): for the read stage's
    SEGMENT_COLUMNS (ts_ns, record, stream, src, sport, dst, dport, seq, ack, flags, payload, at,
    size; a segment's `record` and `stream` being its index in the range and local stream there),
    an `array` of machine integers per integer column ("q": int64, "i": int32) and (offsets, data)
    per bytes column: array("i") of n + 1 offsets into one bytes. Arrow wraps them without a
    conversion per value; compiled, each field goes from the segment to the array in C."""
    n = len(segments)
    longs = [array("q", bytes(8 * n)) for _ in range(5)]  # ts_ns, record, seq, ack, at
    ints = [array("i", bytes(4 * n)) for _ in range(5)]  # stream, sport, dport, flags, size
    ends = [array("i", bytes(4 * (n + 1))) for _ in range(3)]  # src, dst, payload: 0, then each value's end
    ts, record, seq, ack, at = longs  # (compiled: typed views of the arrays; interpreted: the arrays)
    stream, sport, dport, flags, size = ints
    src_end, dst_end, payload_end = ends
    src_size = dst_size = payload_size = 0
    srcs, dsts, payloads = [], [], []
    for i in range(n):
        segment = segments[i]
        ts[i] = segment.ts_ns
        record[i] = segment.record
        stream[i] = segment.stream
        sport[i] = segment.sport
        dport[i] = segment.dport
        seq[i] = segment.seq
        ack[i] = segment.ack
        flags[i] = segment.flags
        at[i] = segment.at
        size[i] = segment.size
        src_size += len(segment.src)
        dst_size += len(segment.dst)
        payload_size += len(segment.payload)
        if payload_size > _MAX_OFFSET:
            raise OverflowError(f"{n} segments hold more than 2 GiB of payload: pack fewer at a time")
        src_end[i + 1] = src_size
        dst_end[i + 1] = dst_size
        payload_end[i + 1] = payload_size
        srcs.append(segment.src)
        dsts.append(segment.dst)
        payloads.append(segment.payload)
    # in SEGMENT_COLUMNS' order
    return [longs[0], longs[1], ints[0], (ends[0], b"".join(srcs)), ints[1], (ends[1], b"".join(dsts)), ints[2],
            longs[2], longs[3], ints[3], (ends[2], b"".join(payloads)), longs[4], ints[4]]


# A TCP conversation's endpoints as text, the one encoding every table, log and saved state uses:
# "ip:port" ("[ip6]:port"), and the conversation, whichever side sent, as "low|high".

def format_endpoint(address: bytes, port: int) -> str:
    if len(address) == 4:
        return f"{inet_ntop(AF_INET, address)}:{port}"
    return f"[{inet_ntop(AF_INET6, address)}]:{port}"


def parse_endpoint(text: str) -> tuple[bytes, int]:
    """format_endpoint's inverse: (packed address, port)."""
    address, port = text.rsplit(":", 1)
    address = address.strip("[]")
    return inet_pton(AF_INET6 if ":" in address else AF_INET, address), int(port)


def pair_key(a: str, b: str) -> str:
    """Two formatted endpoints as one key, the same from either side."""
    return f"{a}|{b}" if a < b else f"{b}|{a}"


def conversation_key(src: bytes, sport: int, dst: bytes, dport: int) -> str:
    """A TCP conversation's key (carried states are found by it): pair_key of its endpoints."""
    return pair_key(format_endpoint(src, sport), format_endpoint(dst, dport))


class PacketParser:
    """Turns link-layer records into TCP segments; keeps counts of everything skipped."""

    def __init__(self, max_fragment_sets: int = 1024) -> None:
        self.skipped: Counter[str] = Counter()  # reason -> packets
        self._fragments: dict[tuple, _FragmentSet] = {}
        self._max_fragment_sets = max_fragment_sets
        # IPv4 addresses met, as bytes, in the slot of their last octet's low 6 bits (see _known_address)
        self._addresses = [b"\0\0\0\0"] * _ADDRESS_SLOTS

    def parse(self, ts_ns: int, link_type: int, data: bytes, offset: int = -1) -> Segment | None:
        """`offset`: where `data` lies in its capture file, when the segment is to say where its
        payload lies there (`at`, `size`) rather than hold a copy of it. A payload that is not one
        stretch of the record (reassembled from IP fragments) or is empty is held all the same."""
        # Fast path for the common case, Ethernet + IPv4 (no fragment) + TCP, in one go.
        if link_type == 1 and len(data) >= 54 and data[12] == 8 and data[13] == 0 and data[23] == 6 \
                and not data[20] & 0x3F and not data[21]:
            header = (data[14] & 0x0F) * 4
            tcp = 14 + header
            total = (data[16] << 8) | data[17]
            end = 14 + total if header <= total <= len(data) - 14 else len(data)
            if header >= 20 and tcp + 20 <= end:
                return _segment(ts_ns, self._address(data, 26), self._address(data, 30), data, tcp, end, offset)
        ip = self._link(link_type, data)
        if ip is None:
            return None
        if not ip:
            self.skipped["empty"] += 1
            return None
        # the link layer's IP packet is always the record's tail
        ip_at = offset + len(data) - len(ip) if offset >= 0 else -1
        version = ip[0] >> 4
        if version == 4:
            return self._ipv4(ts_ns, ip, ip_at)
        if version == 6:
            return self._ipv6(ts_ns, ip, ip_at)
        self.skipped["not-ip"] += 1
        return None

    def _address(self, data: bytes, at: int) -> bytes:
        """The IPv4 address at data[at:at + 4], as _known_address gives it."""
        return _known_address(data, at, at + 4, self._addresses)

    def finish(self) -> None:
        """End of input: fragments that never completed are counted."""
        if self._fragments:
            self.skipped["ip-fragments-incomplete"] += sum(len(f.pieces) for f in self._fragments.values())
            self._fragments.clear()

    # -- link layer -----------------------------------------------------------------------------

    def _link(self, link_type: int, data: bytes) -> bytes | None:
        if link_type == 1:  # Ethernet
            offset = 12
            if len(data) < 14:
                self.skipped["short-link-header"] += 1
                return None
            ether_type = _ETHER_TYPE(data, offset)[0]
            while ether_type in VLAN_TAGS and len(data) >= offset + 6:
                offset += 4
                ether_type = _ETHER_TYPE(data, offset)[0]
            return self._ether_type(ether_type, data, offset + 2)
        if link_type == 113:  # Linux cooked v1: protocol at 14, header 16
            if len(data) < 16:
                self.skipped["short-link-header"] += 1
                return None
            return self._ether_type(_ETHER_TYPE(data, 14)[0], data, 16)
        if link_type == 276:  # Linux cooked v2: protocol at 0, header 20
            if len(data) < 20:
                self.skipped["short-link-header"] += 1
                return None
            return self._ether_type(_ETHER_TYPE(data, 0)[0], data, 20)
        if link_type in (0, 108):  # BSD loopback: a 4-byte address family (host order for NULL)
            if len(data) < 4:
                self.skipped["short-link-header"] += 1
                return None
            family = _NULL_BE(data, 0)[0] if link_type == 108 else _NULL_LE(data, 0)[0]
            if link_type == 0 and family > 0xFFFF:
                family = _NULL_BE(data, 0)[0]  # written by a big-endian host
            if family == 2 or family in BSD_AF_INET6:
                return data[4:]
            self.skipped["not-ip"] += 1
            return None
        if link_type in (12, 101, 228, 229):  # raw IP
            return data
        self.skipped[f"link-type-{link_type}"] += 1
        return None

    def _ether_type(self, ether_type: int, data: bytes, offset: int) -> bytes | None:
        if ether_type in (ETHERTYPE_IPV4, ETHERTYPE_IPV6):
            return data[offset:]
        self.skipped["not-ip"] += 1
        return None

    # -- IP ------------------------------------------------------------------------------------

    def _ipv4(self, ts_ns: int, ip: bytes, ip_at: int = -1) -> Segment | None:
        if len(ip) < 20:
            self.skipped["short-ip-header"] += 1
            return None
        vihl, _, total, ident, frag, _, proto, _, src, dst = _IPV4(ip, 0)
        header = (vihl & 0x0F) * 4
        if proto != IPPROTO_TCP:
            self.skipped["not-tcp"] += 1
            return None
        # Bound by the IP length: Ethernet pads short frames; TSO captures may say 0.
        end = total if header <= total <= len(ip) else len(ip)
        payload = ip[header:end]
        more, offset = frag & 0x2000, (frag & 0x1FFF) * 8
        if more or offset:
            payload = self._defragment((4, src, dst, ident), offset, bool(more), payload)
            if payload is None:
                return None
            ip_at = -1  # (reassembled: no longer a stretch of the record)
        return self._tcp(ts_ns, src, dst, payload, ip_at + header if ip_at >= 0 else -1)

    def _ipv6(self, ts_ns: int, ip: bytes, ip_at: int = -1) -> Segment | None:
        if len(ip) < 40:
            self.skipped["short-ip-header"] += 1
            return None
        _, length, next_header, _, src, dst = _IPV6(ip, 0)
        end = 40 + length if length and 40 + length <= len(ip) else len(ip)
        offset = 40
        while next_header in IPV6_EXTENSIONS or next_header == IPPROTO_FRAGMENT:
            if offset + 8 > end:
                self.skipped["short-ip-header"] += 1
                return None
            if next_header == IPPROTO_FRAGMENT:
                # What follows is one piece of the fragmentable part (further extension headers
                # and TCP): reassemble it, then go on parsing the whole.
                frag, ident = struct.unpack_from(">HI", ip, offset + 2)
                next_header = ip[offset]
                whole = self._defragment((6, src, dst, ident), frag & 0xFFF8, bool(frag & 1),
                                         ip[offset + 8:end])
                if whole is None:
                    return None
                ip, offset, end = whole, 0, len(whole)
                ip_at = -1
            elif next_header == 51:  # AH counts in 4-byte units
                next_header, offset = ip[offset], offset + (ip[offset + 1] + 2) * 4
            else:
                next_header, offset = ip[offset], offset + (ip[offset + 1] + 1) * 8
        if next_header != IPPROTO_TCP:
            self.skipped["not-tcp"] += 1
            return None
        payload = ip[offset:end]
        return self._tcp(ts_ns, src, dst, payload, ip_at + offset if ip_at >= 0 else -1)

    def _defragment(self, key: tuple, offset: int, more: bool, data: bytes) -> bytes | None:
        pieces = self._fragments.get(key)
        if pieces is None:
            if len(self._fragments) >= self._max_fragment_sets:  # bounded: drop the oldest set
                oldest = next(iter(self._fragments))
                self.skipped["ip-fragments-incomplete"] += len(self._fragments.pop(oldest).pieces)
            pieces = self._fragments[key] = _FragmentSet()
        pieces.add(offset, more, data)
        whole = pieces.assemble()
        if whole is None:
            return None
        del self._fragments[key]
        return whole

    # -- TCP -----------------------------------------------------------------------------------

    def _tcp(self, ts_ns: int, src: bytes, dst: bytes, tcp: bytes, tcp_at: int = -1) -> Segment | None:
        """`tcp_at`: where `tcp` lies in the capture file (-1: unknown)."""
        if len(tcp) < 20:
            self.skipped["short-tcp-header"] += 1
            return None
        return _segment(ts_ns, src, dst, tcp, 0, len(tcp), tcp_at)


def _segment(ts_ns: int, src: bytes, dst: bytes, data: bytes, tcp: int, end: int, data_at: int) -> Segment:
    """The segment of the TCP header at `tcp` in `data` (its 20 bytes there), its payload up to `end`
    (at most len(data)). The fields are read octet by octet (compiled: C loads, no struct call, no
    tuple of boxed integers), the payload copied out without a slice object, and the segment made
    without a call to its __init__. `data_at` >= 0: where `data` lies in the capture file; a
    payload is then not copied but placed (Segment.at)."""
    segment = Segment.__new__(Segment)
    segment.ts_ns = ts_ns
    segment.src = src
    segment.dst = dst
    segment.sport = (data[tcp] << 8) | data[tcp + 1]
    segment.dport = (data[tcp + 2] << 8) | data[tcp + 3]
    seq, ack = data[tcp + 4], data[tcp + 8]  # (compiled: 64-bit, so that << 24 cannot overflow)
    segment.seq = (seq << 24) | (data[tcp + 5] << 16) | (data[tcp + 6] << 8) | data[tcp + 7]
    segment.ack = (ack << 24) | (data[tcp + 9] << 16) | (data[tcp + 10] << 8) | data[tcp + 11]
    segment.flags = data[tcp + 13]
    start = tcp + (data[tcp + 12] >> 4) * 4
    if start > end:  # a data offset past the end: no payload
        start = end
    segment.size = end - start
    if data_at >= 0 and end > start:
        segment.payload = b""
        segment.at = data_at + start
    else:
        segment.payload = _bytes_of(data, start, end)
        segment.at = -1
    segment.record = 0
    segment.stream = -1
    return segment


class _FragmentSet:
    __slots__ = ("pieces", "total")

    def __init__(self) -> None:
        self.pieces: dict[int, bytes] = {}
        self.total: int | None = None

    def add(self, offset: int, more: bool, data: bytes) -> None:
        self.pieces.setdefault(offset, data)
        if not more:
            self.total = offset + len(data)

    def assemble(self) -> bytes | None:
        if self.total is None:
            return None
        covered, parts = 0, []
        for offset in sorted(self.pieces):
            data = self.pieces[offset]
            if offset > covered:
                return None
            parts.append(data[covered - offset:])
            covered = max(covered, offset + len(data))
        return b"".join(parts) if covered >= self.total else None
