"""A TLS twin of a plain capture: every AMQP connection of it carried by TLS 1.3 instead, with the
key log that decrypts it, for the TLS decode benchmark (bench/decode_bench.py --tls).

    python bench/tls_twin.py PLAIN.pcap TWIN.pcap TWIN.keys [--suite 0x1301]

Each TCP connection to port 5672 moves to 5671 and gets a TLS 1.3 handshake before its first byte
(ClientHello, ServerHello with the server's Finished, the client's Finished, each Finished under
its side's handshake traffic key); every TCP segment's payload becomes one TLS record (what clients
write: a record per write), sealed with the side's application traffic key (AES-GCM or
ChaCha20-Poly1305, the `cryptography` package's), so the twin has the plain capture's packets,
times and segmentation, each payload 22 bytes longer. Sequence and acknowledgement numbers, IP
lengths and checksums follow; a retransmitted segment is sealed as its first copy was. The secrets
are random (seeded), in an NSS key log as a client's SSLKEYLOGFILE has them.

Input: an Ethernet/IPv4 pcap (nanosecond or microsecond), as bench/synth.py writes.
"""

from __future__ import annotations

import argparse
import bisect
import random
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305  # noqa: E402

from amqpcap.tls.keys import traffic_keys13  # noqa: E402
from amqpcap.tls.suites import suite_of  # noqa: E402

AMQP, AMQPS = 5672, 5671
ETHERNET = 14
OVERHEAD = 5 + 1 + 16  # record header, inner content type, tag
MAX_PLAIN = 1 << 14  # a record's plaintext at most (a larger segment, loopback's 64 KiB ones, is several)
MAX_PAYLOAD = 65_000  # a twin packet's TCP payload at most (an IPv4 packet's length is 16 bits)
RECORD = struct.Struct("<IIII")
LABELS = ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0",
          "SERVER_TRAFFIC_SECRET_0")


def _packets(f):
    """(seconds, fraction, packet) of each record after the global header."""
    while True:
        head = f.read(16)
        if len(head) < 16:
            return
        sec, frac, caplen, _ = RECORD.unpack(head)
        yield sec, frac, f.read(caplen)


def _tcp(packet: bytes):
    """(ip start, tcp start, payload start, src, sport, dst, dport, seq, ack, flags) of an
    Ethernet/IPv4/TCP frame to or from the AMQP port, else None."""
    if len(packet) < ETHERNET + 40 or packet[12:14] != b"\x08\x00" or packet[ETHERNET + 9] != 6:
        return None
    ip = ETHERNET
    tcp = ip + (packet[ip] & 0x0F) * 4
    sport, dport, seq, ack = struct.unpack_from(">HHII", packet, tcp)
    if AMQP not in (sport, dport):
        return None
    payload = tcp + (packet[tcp + 12] >> 4) * 4
    return ip, tcp, payload, packet[ip + 12:ip + 16], sport, packet[ip + 16:ip + 20], dport, seq, ack, packet[tcp + 13]


class Side:
    """One direction of a connection: where its data segments start (stream order numbers their
    records), its application keys, and the handshake bytes before its stream."""

    def __init__(self) -> None:
        self.base: int | None = None  # the sequence number of stream offset 0
        self.lengths: dict[int, int] = {}  # stream offset of each data segment -> its length
        self.starts: list[int] = []  # those offsets, sorted
        self.records: list[int] = []  # records before each of them
        self.added = 0
        self.aead = None
        self.iv = 0
        self.sealed: dict[int, tuple[int, bytes]] = {}  # offset -> (plain length, its records)

    def plan(self) -> None:
        self.starts = sorted(self.lengths)
        self.records, count = [], 0
        for start in self.starts:
            self.records.append(count)
            count += -(-self.lengths[start] // MAX_PLAIN)

    def before(self, offset: int) -> int:
        """Records before the plain stream's `offset`."""
        i = bisect.bisect_left(self.starts, offset)
        return self.records[i] if i < len(self.records) else (self.records[-1] + -(-self.lengths[self.starts[-1]] //
                                                                                    MAX_PLAIN) if self.starts else 0)

    def twin_offset(self, offset: int) -> int:
        """Where the plain stream's `offset` lies in the twin's (after the handshake)."""
        return offset + self.added + OVERHEAD * self.before(offset)

    def seq(self, offset: int) -> int:
        return (self.base + self.twin_offset(offset)) & 0xFFFFFFFF


def _handshake_message(kind: int, body: bytes) -> bytes:
    return bytes([kind]) + len(body).to_bytes(3, "big") + body


def _clear(record_version: int, message: bytes) -> bytes:
    return bytes([22, 3, record_version]) + len(message).to_bytes(2, "big") + message


def _sealed(aead, iv: int, seq: int, inner: bytes) -> bytes:
    header = bytes([23, 3, 3]) + (len(inner) + 16).to_bytes(2, "big")
    return header + aead.encrypt((iv ^ seq).to_bytes(12, "big"), inner, header)


def _hellos(rng: random.Random, suite: int, name: bytes) -> tuple[bytes, bytes, bytes]:
    """(client random, ClientHello record, ServerHello record) of a TLS 1.3 handshake."""
    client_random, server_random, session = rng.randbytes(32), rng.randbytes(32), rng.randbytes(32)
    sni = (len(name) + 3).to_bytes(2, "big") + b"\x00" + len(name).to_bytes(2, "big") + name
    extensions = b"\x00\x00" + len(sni).to_bytes(2, "big") + sni + b"\x00\x2b\x00\x03\x02\x03\x04"
    body = (b"\x03\x03" + client_random + b"\x20" + session + b"\x00\x02" + suite.to_bytes(2, "big") + b"\x01\x00"
            + len(extensions).to_bytes(2, "big") + extensions)
    client_hello = _clear(1, _handshake_message(1, body))
    extensions = b"\x00\x2b\x00\x02\x03\x04"
    body = (b"\x03\x03" + server_random + b"\x20" + session + suite.to_bytes(2, "big") + b"\x00"
            + len(extensions).to_bytes(2, "big") + extensions)
    return client_random, client_hello, _clear(3, _handshake_message(2, body))


def _rewrite(packet: bytes, ip: int, tcp: int, payload: int, seq: int, ack: int, data: bytes,
             src=None, dst=None, flags=None) -> bytes:
    """The packet with new sequence numbers and payload (on port 5671), its IPv4 header mended."""
    out = bytearray(packet[:payload]) + data
    sport, dport = struct.unpack_from(">HH", out, tcp)
    struct.pack_into(">HHII", out, tcp, AMQPS if sport == AMQP else sport, AMQPS if dport == AMQP else dport, seq, ack)
    if src is not None:
        out[ip + 12:ip + 16], out[ip + 16:ip + 20] = src, dst
        out[tcp + 13] = flags
    out[ip + 2:ip + 4] = (len(out) - ip).to_bytes(2, "big")
    out[ip + 10:ip + 12] = b"\x00\x00"
    s = sum(struct.unpack_from(f">{(tcp - ip) // 2}H", out, ip))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    out[ip + 10:ip + 12] = (~s & 0xFFFF).to_bytes(2, "big")
    return bytes(out)


def twin(plain: Path, out: Path, keylog: Path, suite_id: int = 0x1301, seed: int = 1) -> int:
    """Write the twin and its key log; the number of connections made TLS."""
    suite = suite_of(suite_id)
    aead_of = ChaCha20Poly1305 if suite.cipher.startswith("CHACHA") else AESGCM
    rng = random.Random(seed)
    sides: dict[tuple, Side] = {}
    with open(plain, "rb") as f:  # first pass: every direction's segment starts
        f.read(24)
        for _, _, packet in _packets(f):
            fields = _tcp(packet)
            if fields is None:
                continue
            _, _, payload, src, sport, dst, dport, seq, _, flags = fields
            side = sides.setdefault((src, sport, dst, dport), Side())
            if flags & 0x02:
                side.base = (seq + 1) & 0xFFFFFFFF
            if len(packet) > payload:
                if side.base is None:
                    side.base = seq
                offset = (seq - side.base) & 0xFFFFFFFF
                side.lengths[offset] = max(side.lengths.get(offset, 0), len(packet) - payload)
    for side in sides.values():
        side.plan()
    keys: list[str] = []
    started: set = set()
    with open(plain, "rb") as f, open(out, "wb", buffering=1 << 22) as w:
        w.write(f.read(24))
        for sec, frac, packet in _packets(f):
            fields = _tcp(packet)
            if fields is None:
                w.write(RECORD.pack(sec, frac, len(packet), len(packet)) + packet)
                continue
            ip, tcp, payload, src, sport, dst, dport, seq, ack, flags = fields
            side = sides[(src, sport, dst, dport)]
            other = sides.setdefault((dst, dport, src, sport), Side())
            client_key = (src, sport, dst, dport) if dport == AMQP else (dst, dport, src, sport)
            client, server = (side, other) if dport == AMQP else (other, side)
            data = packet[payload:]
            if data and client_key not in started:  # the handshake, just before the first byte
                started.add(client_key)
                if client.base is None or server.base is None:
                    client.base = client.base or 0
                    server.base = server.base or 0
                client_random, client_hello, server_hello = _hellos(rng, suite_id, b"rabbit.bench")
                secrets = [rng.randbytes(32 if suite.hash == "SHA256" else 48) for _ in LABELS]
                keys += [f"{label} {client_random.hex()} {secret.hex()}" for label, secret in zip(LABELS, secrets)]
                finished = []
                for secret in secrets[:2]:
                    key, iv = traffic_keys13(suite, secret)
                    message = _handshake_message(20, rng.randbytes(len(secret)))
                    finished.append(_sealed(aead_of(key), int.from_bytes(iv, "big"), 0, message + b"\x16"))
                server_flight = server_hello + finished[1]
                client.added, server.added = len(client_hello) + len(finished[0]), len(server_flight)
                for which, secret in ((client, secrets[2]), (server, secrets[3])):
                    key, iv = traffic_keys13(suite, secret)
                    which.aead, which.iv = aead_of(key), int.from_bytes(iv, "big")
                c_src, c_port, s_src, s_port = client_key
                for chunk, seq_at, ack_at, from_client in (
                        (client_hello, client.base, server.base, True),
                        (server_flight, server.base, client.base + len(client_hello), False),
                        (finished[0], client.base + len(client_hello), server.base + len(server_flight), True)):
                    handshake = bytearray(packet[:tcp + 20])
                    handshake[tcp + 12] = 5 << 4
                    struct.pack_into(">HH", handshake, tcp, *((c_port, s_port) if from_client else (s_port, c_port)))
                    made = _rewrite(bytes(handshake), ip, tcp, tcp + 20, seq_at & 0xFFFFFFFF, ack_at & 0xFFFFFFFF,
                                    chunk, *((c_src, s_src) if from_client else (s_src, c_src)), 0x18)
                    w.write(RECORD.pack(sec, frac, len(made), len(made)) + made)
            began = client_key in started
            if data:
                offset = (seq - side.base) & 0xFFFFFFFF
                found = side.sealed.get(offset)
                if found is None or found[0] != len(data):  # (a retransmission: sealed as its first copy)
                    first = side.before(offset)
                    records = b"".join(_sealed(side.aead, side.iv, first + n, bytes(data[at:at + MAX_PLAIN]) + b"\x17")
                                       for n, at in enumerate(range(0, len(data), MAX_PLAIN)))
                    found = side.sealed[offset] = (len(data), records)
                data = found[1]
                new_seq = side.seq(offset)
            elif flags & 0x02 or side.base is None:
                new_seq = seq
            else:
                offset = (seq - side.base) & 0xFFFFFFFF
                new_seq = side.seq(offset) if began else seq
            new_ack = ack
            if flags & 0x10 and other.base is not None:
                acked = (ack - other.base) & 0xFFFFFFFF
                if began and acked < 1 << 31:
                    new_ack = other.seq(acked)
            for at in range(0, max(len(data), 1), MAX_PAYLOAD):  # (what no longer fits one IPv4 packet: two)
                made = _rewrite(packet, ip, tcp, payload, (new_seq + at) & 0xFFFFFFFF, new_ack,
                                bytes(data[at:at + MAX_PAYLOAD]))
                w.write(RECORD.pack(sec, frac, len(made), len(made)) + made)
    keylog.write_text("\n".join(keys) + "\n")
    return len(started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plain", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("keylog", type=Path)
    parser.add_argument("--suite", default="0x1301", help="TLS 1.3 suite id (0x1301, 0x1302, 0x1303)")
    args = parser.parse_args(argv)
    print(f"{twin(args.plain, args.out, args.keylog, int(args.suite, 16))} connections made TLS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
