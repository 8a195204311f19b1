"""The packet parser against Scapy's dissection (the reference): every TCP packet of every sample
gives the same addresses, ports, sequence and acknowledgement numbers, flags and payload. Packets
Scapy cannot hand over whole are left out: IP fragments (the parser reassembles them; Scapy does
not)."""

from __future__ import annotations

import socket

import pytest
from scapy.config import conf
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment
from scapy.packet import Raw

from amqp_decode.capture import read_records
from amqp_decode.packets import PacketParser
from tests.capture.captures import ALL_SAMPLES, sample_id


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
