"""The packet parser against Scapy's dissection (the reference): every TCP packet of every sample
gives the same addresses, ports, sequence and acknowledgement numbers, flags and payload. Packets
Scapy cannot hand over whole are left out: IP fragments (the parser reassembles them; Scapy does
not)."""

from __future__ import annotations

import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.config import conf
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment
from scapy.packet import Raw

from amqpcap.capture.packets import PacketParser
from amqpcap.capture.readers import read_records
from tests.helpers.captures import ALL_SAMPLES, sample_id


def _reference(link_type: int, data: bytes):
    """(src, sport, dst, dport, seq, ack, flags, payload) as Scapy dissects the packet, or None."""
    if link_type in (0, 108):  # BSD loopback: Scapy knows only some hosts' address families for IPv6
        packet = (IP if data[4] >> 4 == 4 else IPv6)(data[4:])
    else:
        packet = conf.l2types.get(link_type, Raw)(data)
    ip = packet.getlayer(IP) or packet.getlayer(IPv6)
    tcp = packet.getlayer(TCP)
    if ip is None or tcp is None or (isinstance(ip, IP) and (ip.flags.MF or ip.frag)) \
            or packet.haslayer(IPv6ExtHdrFragment):
        return None
    family = socket.AF_INET if isinstance(ip, IP) else socket.AF_INET6
    payload = tcp[Raw].load if Raw in tcp else b""
    return (socket.inet_pton(family, ip.src), tcp.sport, socket.inet_pton(family, ip.dst), tcp.dport, tcp.seq,
            tcp.ack, int(tcp.flags), payload)


@pytest.mark.parametrize("path", ALL_SAMPLES, ids=sample_id)
def test_every_tcp_packet_parses_as_scapy_dissects_it(path):
    parser, compared = PacketParser(), 0
    for ts_ns, link_type, data in read_records(str(path)):
        expected = _reference(link_type, data)
        segment = parser.parse(ts_ns, link_type, data)
        if expected is None:
            continue
        assert segment is not None
        assert (segment.src, segment.sport, segment.dst, segment.dport, segment.seq, segment.ack, segment.flags,
                segment.payload) == expected
        assert segment.ts_ns == ts_ns and (segment.record, segment.stream) == (0, -1)
        compared += 1
    assert compared > 0


@pytest.mark.parametrize("seq, ack", [(0xFEDCBA98, 0x89ABCDEF), (0x80000000, 0xFFFFFFFF), (0, 1)])
def test_sequence_numbers_with_the_high_bit_set_are_read_unsigned(seq, ack):
    from scapy.layers.l2 import Ether
    data = bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=65535, dport=5672, seq=seq, ack=ack,
                                                                    flags="PA") / b"AMQP\x00\x00\x09\x01")
    segment = PacketParser().parse(1, 1, data)
    assert (segment.sport, segment.seq, segment.ack, segment.payload) == (65535, seq, ack, b"AMQP\x00\x00\x09\x01")
    assert _reference(1, data) == (segment.src, segment.sport, segment.dst, segment.dport, segment.seq, segment.ack,
                                   segment.flags, segment.payload)


@pytest.mark.parametrize("link_type, strip", [(1, 0), (101, 14)], ids=["ethernet", "raw-ip"])
@pytest.mark.parametrize("data_offset, payload", [(15, b""), (7, b""), (6, b"PQ"), (5, b"\x00\x00\x00\x00PQ")])
def test_a_data_offset_past_the_segment_leaves_no_payload_rather_than_an_error(link_type, strip, data_offset, payload):
    """A TCP header claiming more 32-bit words than the segment holds: the payload is what lies after
    the claimed header within the segment, none when it claims past the end (as a slice would give;
    compiled, the copy is made without a slice and must not read past the segment)."""
    from scapy.layers.l2 import Ether
    data = bytearray(bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=5672, dport=40000, flags="PA")
                           / b"\x00\x00\x00\x00PQ"))
    data[14 + 20 + 12] = data_offset << 4  # the TCP header's data offset (the IP header is 20 bytes)
    segment = PacketParser().parse(7, link_type, bytes(data[strip:]))
    assert (segment.sport, segment.dport, segment.flags, segment.payload) == (5672, 40000, 0x18, payload)


def _ipv4_packet(src: bytes, dst: bytes, payload: bytes = b"") -> bytes:
    """Ethernet + IPv4 + TCP (no options) from src:40000 to dst:5672."""
    ip = (b"\x45\x00" + (40 + len(payload)).to_bytes(2, "big") + b"\x00\x01\x40\x00\x40\x06\x00\x00" + src + dst)
    tcp = b"\x9c\x40\x16\x28" + bytes(8) + b"\x50\x18\xff\xff\x00\x00\x00\x00"
    return b"\x00" * 12 + b"\x08\x00" + ip + tcp + payload


_HOSTS = [bytes([10, 0, 0, i]) for i in range(1, 5)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_HOSTS), st.sampled_from(_HOSTS)), min_size=1, max_size=40))
def test_addresses_are_the_packets_own_whichever_came_before(pairs):
    """The parser hands out the bytes object it made for an address met lately (PacketParser._address):
    whatever the order of addresses, each is the packet's own."""
    parser = PacketParser()
    for src, dst in pairs:
        segment = parser.parse(1, 1, _ipv4_packet(src, dst, b"x"))
        assert (segment.src, segment.dst, segment.payload) == (src, dst, b"x")


def test_a_conversations_addresses_are_made_once():
    """Both ways of a conversation, one bytes object per address; a server's stays the same while
    other clients' packets come between (each lookup keyed by an address then hashes it once)."""
    parser = PacketParser()
    client, server, other = b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02", b"\x0a\x00\x00\x03"
    first = parser.parse(1, 1, _ipv4_packet(client, server))
    for src, dst in [(server, client), (client, server), (server, client)]:
        segment = parser.parse(1, 1, _ipv4_packet(src, dst))
        assert {id(segment.src), id(segment.dst)} == {id(first.src), id(first.dst)}
    for src, dst in [(other, server), (server, other), (client, server), (server, client), (other, server)]:
        segment = parser.parse(1, 1, _ipv4_packet(src, dst))
        assert (segment.src, segment.dst) == (src, dst)
        assert (segment.dst if dst == server else segment.src) is first.dst
