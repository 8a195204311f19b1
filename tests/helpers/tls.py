"""Crafted TLS conversations: a known AMQP conversation (tools/craft_samples.py's frames) carried
by a real TLS client and server of Python's `ssl` (OpenSSL), talking through memory, with the
client's key log. What TLS puts on the wire is OpenSSL's own; the TCP segments around it are the
crafted samples' (Scapy).

    capture = tls_capture(tmp_path, "tls13", frames, version="TLSv1.3")
    capture.path, capture.keylog, capture.records   # the pcap, its key log, what each direction carried

Real captures of real brokers are in data/samples/tls/; these reach what a broker will not do
on request (every suite, EtM on and off, a chosen segmentation, lost segments).
"""

from __future__ import annotations

import datetime
import functools
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from tools import craft_samples as craft

SNI = "rabbit.amqpcap.test"
SUBJECT = f"O=amqpcap tests,CN={SNI}"
ISSUER = "O=amqpcap tests,CN=amqpcap test CA"
OP_NO_ENCRYPT_THEN_MAC = 0x00080000  # OpenSSL's SSL_OP_NO_ENCRYPT_THEN_MAC (not among Python's names)
MSS = 1448


@functools.lru_cache(maxsize=1)
def certificate() -> tuple[str, str]:
    """(certificate chain PEM path, key PEM path) of a server certificate signed by a test CA."""
    directory = Path(tempfile.mkdtemp(prefix="amqpcap-tls-"))
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common),
                          x509.NameAttribute(NameOID.ORGANIZATION_NAME, "amqpcap tests")])
    ca = (x509.CertificateBuilder().subject_name(name("amqpcap test CA")).issuer_name(name("amqpcap test CA"))
          .public_key(ca_key.public_key()).serial_number(1).not_valid_before(now)
          .not_valid_after(now + datetime.timedelta(days=3650))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(name(SNI)).issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(2).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(SNI)]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    chain = directory / "server.pem"
    chain.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(serialization.Encoding.PEM))
    key_path = directory / "server.key"
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(chain), str(key_path)


@dataclass
class TlsCapture:
    path: Path
    keylog: Path
    segments: list  # craft.Segment: the TLS bytes, as the capture has them
    plain: dict = field(default_factory=dict)  # direction -> the plaintext it carried
    cipher: tuple = ()  # the client's SSLSocket.cipher()
    version: str = ""
    session: object = None  # the client's session, to resume


def contexts(version: str = "TLSv1.3", ciphers: str | None = None, etm: bool = True, keylog: Path | None = None,
             alpn: list[str] | None = None, server_options: int = 0) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(client, server) contexts of one version (and cipher list, for TLS 1.2); the client's key
    log at `keylog`. Connections of the same contexts can resume each other's sessions."""
    chain, key = certificate()
    tls_version = getattr(ssl.TLSVersion, version.replace(".", "_"))
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(chain, key)
    client_context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_context.check_hostname = False
    client_context.verify_mode = ssl.CERT_NONE
    for context in (server_context, client_context):
        context.minimum_version = context.maximum_version = tls_version
        if ciphers:
            context.set_ciphers(ciphers)
    if not etm:
        server_context.options |= OP_NO_ENCRYPT_THEN_MAC
        client_context.options |= OP_NO_ENCRYPT_THEN_MAC
    server_context.options |= server_options
    if alpn:
        client_context.set_alpn_protocols(alpn)
        server_context.set_alpn_protocols(alpn)
    if keylog is not None:
        client_context.keylog_filename = str(keylog)
    return client_context, server_context


def conversation(frames: list, pair: tuple[ssl.SSLContext, ssl.SSLContext], session=None,
                 max_record: int | None = None) -> tuple[list, dict, ssl.SSLObject]:
    """The TLS bytes each direction sends, in order ((direction, bytes) chunks), for `frames`
    (craft.Frame: direction and data) carried over one TLS connection of the contexts `pair`
    (resuming `session`); the plaintext per direction; the client's SSLObject (its cipher,
    version, session). `max_record`: the most plaintext written at once (a record each)."""
    client_context, server_context = pair
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_context.wrap_bio(c_in, c_out, server_hostname=SNI, session=session)
    server = server_context.wrap_bio(s_in, s_out, server_side=True)
    out: list = []
    done = {id(client): False, id(server): False}
    for _ in range(20):  # the handshake, flight by flight
        for side, source, sink, direction in ((client, c_out, s_in, "C>S"), (server, s_out, c_in, "S>C")):
            if not done[id(side)]:
                try:
                    side.do_handshake()
                    done[id(side)] = True
                except ssl.SSLWantReadError:
                    pass
            data = source.read()
            if data:
                out.append((direction, data))
                sink.write(data)
        if all(done.values()):
            break
    plain = {"C>S": b"", "S>C": b""}
    for frame in frames:
        writer, reader, source, sink = (client, server, c_out, s_in) if frame.direction == "C>S" \
            else (server, client, s_out, c_in)
        data = frame.data
        step = max_record or len(data)
        for i in range(0, len(data), step):
            writer.write(data[i:i + step])
        plain[frame.direction] += data
        chunk = source.read()
        out.append((frame.direction, chunk))
        sink.write(chunk)
        try:
            while reader.read(1 << 16):
                pass
        except ssl.SSLWantReadError:
            pass
        # what the reader sends back unasked (TLS 1.3: NewSessionTicket after the handshake; KeyUpdates)
        back = (s_out if reader is server else c_out).read()
        if back:
            direction = "S>C" if reader is server else "C>S"
            out.append((direction, back))
            (c_in if reader is server else s_in).write(back)
            try:
                while writer.read(1 << 16):
                    pass
            except ssl.SSLWantReadError:
                pass
    # both ends close with close_notify (OpenSSL keeps a TLS 1.2 session to resume only then)
    for side, source, sink, direction in ((client, c_out, s_in, "C>S"), (server, s_out, c_in, "S>C"),
                                          (client, c_out, s_in, "C>S")):
        try:
            side.unwrap()
        except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
            pass
        data = source.read()
        if data:
            out.append((direction, data))
            sink.write(data)
    return out, plain, client


def segments(chunks: list, mss: int = MSS) -> list:
    """The chunks as TCP segments: each direction's bytes cut at `mss`, in conversation order."""
    offsets = {"C>S": 0, "S>C": 0}
    out = []
    for direction, data in chunks:
        for i in range(0, len(data), mss):
            part = data[i:i + mss]
            out.append(craft.Segment(direction, offsets[direction], part))
            offsets[direction] += len(part)
    return out


def tls_capture(tmp_path: Path, name: str, frames: list, server=("10.1.0.9", 5671), lost=(), drop=(),
                keylog: bool = True, max_record: int | None = None, **options) -> TlsCapture:
    """A pcap of `frames` over TLS (`options`: contexts'), with its key log. `drop`: indices of
    TCP segments the capture lost (the receiver still got them)."""
    keys = tmp_path / f"{name}.keys"
    pair = contexts(keylog=keys if keylog else None, **options)
    chunks, plain, client = conversation(frames, pair, max_record=max_record)
    found = segments(chunks)
    kept = [s for i, s in enumerate(found) if i not in set(drop)]
    lost_ranges = [(s.direction, s.seq_offset, len(s.data)) for i, s in enumerate(found) if i in set(drop)]
    capture = craft.Capture(name, "", kept, [], lost=lost_ranges + list(lost))
    path = tmp_path / f"{name}.pcap"
    craft.write_pcap(path, craft.tcp_packets(capture, server=server))
    if not keylog:
        keys.write_text("")
    return TlsCapture(path, keys, found, plain, client.cipher(), client.version(), client.session)


def hellos(capture: Path) -> list[tuple[bytes, bytes, int]]:
    """(client random, server random, suite id) of each TLS handshake in a capture, read apart
    from amqpcap (Scapy's packets, each direction's first records by hand): what its key logs'
    TLS 1.2 master secrets are expanded with. A HelloRetryRequest's stand-in random is passed
    over for the ServerHello after it."""
    from scapy.all import IP, TCP, IPv6, PcapReader
    retry = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
    streams: dict[tuple, dict[int, bytes]] = {}
    with PcapReader(str(capture)) as packets:
        for packet in packets:
            ip = packet.getlayer(IP) or packet.getlayer(IPv6)
            if ip is None or TCP not in packet or not bytes(packet[TCP].payload):
                continue
            key = (ip.src, packet[TCP].sport, ip.dst, packet[TCP].dport)
            streams.setdefault(key, {}).setdefault(packet[TCP].seq, bytes(packet[TCP].payload))
    found: dict[tuple, list] = {}
    for (src, sport, dst, dport), pieces in streams.items():
        data = b"".join(pieces[seq] for seq in sorted(pieces))
        at = 0
        while at + 5 <= len(data) and data[at] in (20, 22):  # handshake records in clear (and CCS)
            kind, size = data[at], int.from_bytes(data[at + 3:at + 5], "big")
            body = data[at + 5:at + 5 + size]
            at += 5 + size
            entry = found.setdefault(tuple(sorted([(src, sport), (dst, dport)])), [None, None, None])
            if kind != 22:
                continue
            if body[:1] == b"\x01" and entry[0] is None:  # (then the Finished, encrypted: passed over)
                entry[0] = body[6:38]
            elif body[:1] == b"\x02" and body[6:38] != retry and entry[1] is None:
                session = body[38]
                entry[1:] = body[6:38], int.from_bytes(body[39 + session:41 + session], "big")
    return [tuple(entry) for entry in found.values() if None not in entry]


def sample_secrets(folder: Path) -> dict[bytes, str]:
    """Every secret the TLS samples' key logs hold, and every key derived from them that records
    are opened with (TLS 1.3: each traffic secret's key and IV, for each suite of its hash; TLS
    1.2: each connection's key block, its MAC keys, keys and IVs): name by the key log's line,
    or by what was derived. (What `find_all` sweeps an output for.)"""
    from amqpcap.tls.keys import KeyBlock12, traffic_keys13
    from amqpcap.tls.suites import suite_of
    from tests.helpers.secrets import needles
    tls13 = [suite_of(i) for i in (0x1301, 0x1302, 0x1303)]
    wanted: dict[bytes, str] = {}
    for log in sorted(folder.glob("*.keys")):
        masters = {}
        for number, line in enumerate(log.read_text().splitlines(), 1):
            parts = line.split()
            if len(parts) != 3 or line.startswith("#"):
                continue
            label, client_random, secret = parts[0], bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
            where = f"{log.name}:{number} {label}"
            wanted.update(needles(secret, where))
            if label == "CLIENT_RANDOM":
                masters[client_random] = secret
            elif "TRAFFIC_SECRET" in label:
                for suite in tls13:
                    if suite.hash == {32: "SHA256", 48: "SHA384"}[len(secret)]:
                        key, iv = traffic_keys13(suite, secret)
                        wanted.update(needles(key, f"{where}'s {suite.name} key"))
                        wanted.update(needles(iv, f"{where}'s {suite.name} IV"))
        for client_random, server_random, suite_id in hellos(log.with_suffix(".pcap")):
            suite = suite_of(suite_id)
            if client_random not in masters or suite.tls13:
                continue
            block = KeyBlock12(suite, masters[client_random], client_random, server_random)
            for kind in ("mac_keys", "keys", "ivs"):
                for side, value in zip(("client", "server"), getattr(block, kind)):
                    if len(value) >= 8:  # (a GCM suite's 4-byte implicit nonce is no secret alone)
                        wanted.update(needles(value, f"{log.name} {client_random.hex()[:12]}'s {side} {kind[:-1]}"))
    return wanted
