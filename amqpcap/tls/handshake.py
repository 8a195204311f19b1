"""TLS handshake messages: what the record layer needs of them (randoms, session ids, tickets,
the suite and version chosen, which messages move keys along) and what the tables tell of a TLS
connection (SNI, ALPN, resumption, the server's certificate). RFC 5246, 7.4 (TLS 1.2), RFC 8446, 4
(TLS 1.3); extensions from IANA's "TLS ExtensionType Values".

    for kind, body in messages.feed(fragment):   # a direction's handshake bytes, whole messages out
        hello = client_hello(body) ...

A message that does not parse is a HandshakeError (the layer reports it and goes on).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

# Handshake message types
CLIENT_HELLO, SERVER_HELLO, NEW_SESSION_TICKET, END_OF_EARLY_DATA = 1, 2, 4, 5
ENCRYPTED_EXTENSIONS, CERTIFICATE, SERVER_KEY_EXCHANGE, CERTIFICATE_REQUEST = 8, 11, 12, 13
SERVER_HELLO_DONE, CERTIFICATE_VERIFY, CLIENT_KEY_EXCHANGE, FINISHED, KEY_UPDATE = 14, 15, 16, 20, 24
MESSAGE_NAMES = {1: "ClientHello", 2: "ServerHello", 4: "NewSessionTicket", 5: "EndOfEarlyData",
                 8: "EncryptedExtensions", 11: "Certificate", 12: "ServerKeyExchange", 13: "CertificateRequest",
                 14: "ServerHelloDone", 15: "CertificateVerify", 16: "ClientKeyExchange", 20: "Finished",
                 24: "KeyUpdate"}

# Extensions
SERVER_NAME, ALPN, ENCRYPT_THEN_MAC, EXTENDED_MASTER_SECRET = 0, 16, 22, 23
SESSION_TICKET, PRE_SHARED_KEY, EARLY_DATA, SUPPORTED_VERSIONS, KEY_SHARE = 35, 41, 42, 43, 51

# The ServerHello random of a HelloRetryRequest (RFC 8446, 4.1.3): SHA-256 of "HelloRetryRequest"
HELLO_RETRY_RANDOM = hashlib.sha256(b"HelloRetryRequest").digest()
VERSION_NAMES = {0x0300: "SSLv3", 0x0301: "TLSv1.0", 0x0302: "TLSv1.1", 0x0303: "TLSv1.2", 0x0304: "TLSv1.3"}
MAX_MESSAGE = 1 << 18  # a handshake message claiming more is taken as damage (certificate chains stay far below)


class HandshakeError(ValueError):
    """A handshake message that does not parse."""


def version_name(version: int | None) -> str | None:
    if version is None:
        return None
    return VERSION_NAMES.get(version) or f"0x{version:04x}"


class Messages:
    """One direction's handshake bytes, gathered into whole messages (a message may span records,
    a record may hold several)."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, fragment) -> list[tuple[int, bytes]]:
        """(type, body) of every message the bytes complete."""
        buf = self.buf
        buf += fragment
        out, pos = [], 0
        while len(buf) - pos >= 4:
            size = buf[pos + 1] << 16 | buf[pos + 2] << 8 | buf[pos + 3]
            if size > MAX_MESSAGE:
                self.buf = bytearray()
                raise HandshakeError(f"a handshake message of {size} bytes (type {buf[pos]})")
            if len(buf) - pos - 4 < size:
                break
            out.append((buf[pos], bytes(buf[pos + 4:pos + 4 + size])))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return out

    def pending(self) -> int:
        return len(self.buf)

    def clear(self) -> None:
        self.buf = bytearray()


class _Reader:
    """Big-endian fields of one message, each checked against what is left."""

    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data, self.pos, self.end = data, pos, len(data) if end is None else end

    def _short(self, n: int) -> HandshakeError:
        return HandshakeError(f"{n} bytes wanted where {self.end - self.pos} are left")

    def take(self, n: int) -> bytes:
        if self.pos + n > self.end:
            raise self._short(n)
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def uint(self, n: int) -> int:
        """An n-byte big-endian number (n at most 8), read in place (compiled: C arithmetic on the
        bytes, no slice and no int.from_bytes call: a hello is some twenty of these)."""
        pos = self.pos
        if pos + n > self.end:
            raise self._short(n)
        data = self.data
        value = 0
        for i in range(pos, pos + n):
            value = value << 8 | data[i]
        self.pos = pos + n
        return value

    def vector(self, length_bytes: int) -> bytes:
        return self.take(self.uint(length_bytes))

    def sub(self, length_bytes: int) -> "_Reader":
        size = self.uint(length_bytes)
        reader = _Reader(self.data, self.pos, self.pos + size)
        if reader.end > self.end:
            raise HandshakeError(f"a {size}-byte vector where {self.end - self.pos} bytes are left")
        self.pos += size
        return reader

    def left(self) -> int:
        return self.end - self.pos


def _extensions(reader: _Reader) -> dict[int, bytes]:
    if not reader.left():  # (TLS 1.2 hellos may have none)
        return {}
    block = reader.sub(2)
    found = {}
    while block.left():
        kind = block.uint(2)
        found[kind] = block.vector(2)
    return found


def _alpn(data: bytes) -> list[str]:
    names = _Reader(data).sub(2)
    out = []
    while names.left():
        out.append(names.vector(1).decode("ascii", "replace"))
    return out


def _server_name(data: bytes) -> str | None:
    names = _Reader(data).sub(2)
    while names.left():
        kind = names.uint(1)
        name = names.vector(2)
        if kind == 0:
            return name.decode("ascii", "replace")
    return None


@dataclass
class ClientHello:
    random: bytes
    session_id: bytes
    suites: list[int]
    versions: list[int]  # supported_versions (TLS 1.3 clients), else [legacy version]
    sni: str | None = None
    alpn: list[str] = field(default_factory=list)
    ticket: bytes | None = None  # a TLS 1.2 session ticket offered (b"": asks for one)
    psk: bool = False  # offers TLS 1.3 pre-shared keys (resumption)
    early_data: bool = False
    etm: bool = False
    ems: bool = False


def client_hello(body: bytes) -> ClientHello:
    reader = _Reader(body)
    legacy = reader.uint(2)
    random = reader.take(32)
    session_id = reader.vector(1)
    suites_data = reader.vector(2)
    suites = [suites_data[i] << 8 | suites_data[i + 1] for i in range(0, len(suites_data) - 1, 2)]
    reader.vector(1)  # compression methods
    ext = _extensions(reader)
    versions = [legacy]
    if SUPPORTED_VERSIONS in ext:
        listed = _Reader(ext[SUPPORTED_VERSIONS]).vector(1)
        versions = [listed[i] << 8 | listed[i + 1] for i in range(0, len(listed) - 1, 2)]
    return ClientHello(random, session_id, suites, versions,
                       sni=_server_name(ext[SERVER_NAME]) if SERVER_NAME in ext and ext[SERVER_NAME] else None,
                       alpn=_alpn(ext[ALPN]) if ALPN in ext else [], ticket=ext.get(SESSION_TICKET),
                       psk=PRE_SHARED_KEY in ext, early_data=EARLY_DATA in ext,
                       etm=ENCRYPT_THEN_MAC in ext, ems=EXTENDED_MASTER_SECRET in ext)


@dataclass
class ServerHello:
    random: bytes
    session_id: bytes
    suite: int
    version: int  # the negotiated version (supported_versions for TLS 1.3)
    hello_retry: bool = False
    alpn: str | None = None
    psk: bool = False  # TLS 1.3: resumed with a pre-shared key
    ticket_promised: bool = False  # TLS 1.2: an empty session_ticket extension (a NewSessionTicket follows)
    etm: bool = False
    ems: bool = False


def server_hello(body: bytes) -> ServerHello:
    reader = _Reader(body)
    legacy = reader.uint(2)
    random = reader.take(32)
    session_id = reader.vector(1)
    suite = reader.uint(2)
    reader.uint(1)  # compression
    ext = _extensions(reader)
    version = legacy
    if SUPPORTED_VERSIONS in ext and len(ext[SUPPORTED_VERSIONS]) == 2:
        version = int.from_bytes(ext[SUPPORTED_VERSIONS], "big")
    alpn = _alpn(ext[ALPN]) if ALPN in ext else []
    return ServerHello(random, session_id, suite, version, hello_retry=random == HELLO_RETRY_RANDOM,
                       alpn=alpn[0] if alpn else None, psk=PRE_SHARED_KEY in ext,
                       ticket_promised=SESSION_TICKET in ext, etm=ENCRYPT_THEN_MAC in ext,
                       ems=EXTENDED_MASTER_SECRET in ext)


def encrypted_extensions(body: bytes) -> str | None:
    """TLS 1.3's EncryptedExtensions: the ALPN protocol chosen, if any."""
    ext = _extensions(_Reader(body))
    alpn = _alpn(ext[ALPN]) if ALPN in ext else []
    return alpn[0] if alpn else None


def session_ticket12(body: bytes) -> bytes:
    """A TLS 1.2 NewSessionTicket's ticket (RFC 5077, 3.3)."""
    reader = _Reader(body)
    reader.uint(4)  # lifetime hint
    return reader.vector(2)


def key_update_requested(body: bytes) -> bool:
    if len(body) != 1 or body[0] > 1:
        raise HandshakeError(f"a KeyUpdate of {len(body)} bytes")
    return body[0] == 1


def leaf_certificate(body: bytes, tls13: bool) -> bytes | None:
    """The DER of the first (the peer's own) certificate of a Certificate message."""
    reader = _Reader(body)
    if tls13:
        reader.vector(1)  # certificate_request_context
    certificates = reader.sub(3)
    if not certificates.left():
        return None
    return certificates.vector(3)


@dataclass(frozen=True)
class CertificateFacts:
    subject: str | None
    issuer: str | None
    not_before_us: int | None
    not_after_us: int | None
    sha256: str


_FACTS: dict[bytes, CertificateFacts] = {}  # by DER: a broker shows every connection the same certificate
_FACTS_KEPT = 256


def certificate_facts(der: bytes) -> CertificateFacts:
    """What the tables say of a certificate (its names as RFC 4514 strings). Parsing one costs
    ~60 us, most of a TLS connection's handshake: the facts of the certificates seen last are kept."""
    facts = _FACTS.get(der)
    if facts is None:
        if len(_FACTS) >= _FACTS_KEPT:
            _FACTS.clear()
        facts = _FACTS[der] = _certificate_facts(der)
    return facts


def _certificate_facts(der: bytes) -> CertificateFacts:
    digest = hashlib.sha256(der).hexdigest()
    try:
        from cryptography import x509  # (only where a certificate is seen)
        cert = x509.load_der_x509_certificate(der)
        return CertificateFacts(cert.subject.rfc4514_string(), cert.issuer.rfc4514_string(),
                                int(cert.not_valid_before_utc.timestamp() * 1e6),
                                int(cert.not_valid_after_utc.timestamp() * 1e6), digest)
    except (ValueError, TypeError):
        return CertificateFacts(None, None, None, None, digest)

