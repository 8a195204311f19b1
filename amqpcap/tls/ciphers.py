"""Record protection: one direction's records opened with its keys (the ciphers are the
`cryptography` package's, OpenSSL underneath; none is written here).

    protection = protection_for(suite, key, iv, mac_key=b"", etm=False)   # TLS 1.2
    protection = Aead13(suite, key, iv)                                    # TLS 1.3
    plaintext = protection.open(seq, header, fragment)    # or Undecryptable
    protection.content_type                               # the record's (TLS 1.3: its inner) content type

TLS 1.2 (RFC 5246, 6.2.3): AEAD records (GCM and CCM with an 8-byte explicit nonce, RFC 5288 and
6655; ChaCha20-Poly1305 with the IV XOR the sequence number, RFC 7905) authenticate the sequence
number, type, version and plaintext length; CBC records carry their IV and an HMAC, computed over
the plaintext (MAC-then-encrypt) or over the ciphertext (encrypt-then-MAC, RFC 7366). TLS 1.3 (RFC
8446, 5.2): the nonce is the IV XOR the sequence number, the record header is the additional data,
and the plaintext ends with its real content type and any zero padding.
"""

from __future__ import annotations

import hmac as _compare

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hmac
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305

from amqpcap.tls.keys import HASHES
from amqpcap.tls.suites import HASH_BYTES, Suite

COMPILED = __file__.endswith((".so", ".pyd"))  # (compiled: nonces made in C, ciphers.pxd's helpers)


def _nonce(iv: bytes, seq: int) -> bytes:
    """The IV XOR the sequence number (RFC 8446, 5.3; RFC 7905)."""
    if COMPILED:
        return _xor_nonce(iv, seq)  # noqa: F821
    return (int.from_bytes(iv, "big") ^ seq).to_bytes(12, "big")


def _seq_bytes(seq: int) -> bytes:
    if COMPILED:
        return _be64(seq)  # noqa: F821
    return seq.to_bytes(8, "big")


class Undecryptable(Exception):
    """A record that does not open with these keys (and this sequence number)."""


def _aead(suite: Suite, key: bytes):
    if suite.cipher.startswith("CHACHA20"):
        return ChaCha20Poly1305(key)
    if "CCM" in suite.cipher:
        return AESCCM(key, tag_length=suite.tag_bytes)
    return AESGCM(key)


class Protection:
    """How one direction's records are opened (a base class: the compiled layer calls `open` in C).
    `overhead`: the bytes a record adds to its plaintext at least (header not included), what a
    lost record's plaintext is reckoned from; `content_type`: the last record opened's (no tuple
    made per record)."""

    __slots__ = ()

    def open(self, seq: int, header: bytes, fragment) -> bytes:
        raise NotImplementedError


class Aead12(Protection):
    __slots__ = ("aead", "salt", "iv", "explicit", "tag", "overhead", "content_type")

    def __init__(self, suite: Suite, key: bytes, iv: bytes) -> None:
        self.aead = _aead(suite, key)
        self.explicit = suite.explicit_nonce_bytes
        self.salt = iv  # GCM, CCM: the nonce's first 4 bytes
        self.iv = iv  # ChaCha20: XORed with the sequence number
        self.tag = suite.tag_bytes
        self.overhead = self.explicit + self.tag

    def open(self, seq: int, header: bytes, fragment) -> bytes:
        size = len(fragment) - self.overhead
        if size < 0:
            raise Undecryptable(f"a {len(fragment)}-byte record is shorter than its nonce and tag")
        if self.explicit:
            nonce = self.salt + bytes(fragment[:self.explicit])
            ciphertext = fragment[self.explicit:]
        else:
            nonce = _nonce(self.iv, seq)
            ciphertext = fragment
        aad = _seq_bytes(seq) + header[:3] + size.to_bytes(2, "big")
        try:
            plain = self.aead.decrypt(nonce, ciphertext, aad)
        except InvalidTag:
            raise Undecryptable("authentication failed") from None
        self.content_type = header[0]
        return plain


class Cbc12(Protection):
    __slots__ = ("key", "mac_key", "mac", "mac_bytes", "etm", "overhead", "content_type")

    def __init__(self, suite: Suite, key: bytes, mac_key: bytes, etm: bool) -> None:
        self.key = key
        self.mac_key = mac_key
        self.mac = HASHES[suite.mac]
        self.mac_bytes = HASH_BYTES[suite.mac]
        self.etm = etm
        self.overhead = 16 + self.mac_bytes + 1  # IV, MAC, at least the padding length octet

    def _mac(self, seq: int, header: bytes, data) -> bytes:
        mac = hmac.HMAC(self.mac_key, self.mac())
        mac.update(_seq_bytes(seq) + header[:3] + len(data).to_bytes(2, "big"))
        mac.update(data)
        return mac.finalize()

    def _decrypt(self, iv, ciphertext) -> bytes:
        if not ciphertext or len(ciphertext) % 16:
            raise Undecryptable(f"{len(ciphertext)} bytes of CBC ciphertext are not whole blocks")
        decryptor = Cipher(algorithms.AES(self.key), modes.CBC(bytes(iv))).decryptor()
        return decryptor.update(bytes(ciphertext)) + decryptor.finalize()

    @staticmethod
    def _unpad(plain: bytes, keep: int) -> int:
        """The length of `plain` without its padding (which must leave `keep` bytes), or -1."""
        pad = plain[-1]
        end = len(plain) - pad - 1
        if end < keep or plain[end:-1] != bytes([pad]) * pad:
            return -1
        return end

    def open(self, seq: int, header: bytes, fragment) -> bytes:
        macs = self.mac_bytes
        if self.etm:  # IV + ciphertext, then the MAC over both
            if len(fragment) < 16 + 16 + macs:
                raise Undecryptable(f"a {len(fragment)}-byte record is shorter than an IV, a block and a MAC")
            sealed, tag = fragment[:-macs], bytes(fragment[-macs:])
            if not _compare.compare_digest(self._mac(seq, header, sealed), tag):
                raise Undecryptable("MAC check failed")
            plain = self._decrypt(sealed[:16], sealed[16:])
            end = self._unpad(plain, 0)
            if end < 0:
                raise Undecryptable("bad CBC padding")
            self.content_type = header[0]
            return plain[:end]
        if len(fragment) < 16 + 16:
            raise Undecryptable(f"a {len(fragment)}-byte record is shorter than an IV and a block")
        plain = self._decrypt(fragment[:16], fragment[16:])
        end = self._unpad(plain, macs)
        if end < 0:
            raise Undecryptable("bad CBC padding")
        data, tag = plain[:end - macs], plain[end - macs:end]
        if not _compare.compare_digest(self._mac(seq, header, data), tag):
            raise Undecryptable("MAC check failed")
        self.content_type = header[0]
        return data


class Aead13(Protection):
    __slots__ = ("aead", "decrypt", "iv", "tag", "overhead", "content_type")

    def __init__(self, suite: Suite, key: bytes, iv: bytes) -> None:
        self.aead = _aead(suite, key)
        self.decrypt = self.aead.decrypt  # (bound once: every record calls it)
        self.iv = iv
        self.tag = suite.tag_bytes
        self.overhead = self.tag + 1  # the tag and the inner content type

    def open(self, seq: int, header: bytes, fragment) -> bytes:
        if len(fragment) < self.overhead:
            raise Undecryptable(f"a {len(fragment)}-byte record is shorter than its tag")
        try:
            inner = self.decrypt(_nonce(self.iv, seq), fragment, header)
        except InvalidTag:
            raise Undecryptable("authentication failed") from None
        end = len(inner) - 1
        while end >= 0 and inner[end] == 0:  # zero padding after the content type
            end -= 1
        if end < 0:
            raise Undecryptable("no content type in the record (all padding)")
        self.content_type = inner[end]
        if COMPILED:  # (the decrypted bytes are cut where they are: ciphers.pxd)
            return _cut(inner, end)  # noqa: F821
        return inner[:end]


def protection_for(suite: Suite, key: bytes, iv: bytes, mac_key: bytes = b"", etm: bool = False) -> Protection:
    """A TLS 1.2 direction's protection."""
    if suite.aead:
        return Aead12(suite, key, iv)
    return Cbc12(suite, key, mac_key, etm)
