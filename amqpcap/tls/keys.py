"""TLS key schedules: from a key log's secrets to each direction's record keys.

TLS 1.2 (RFC 5246, 6.3): the key block is PRF(master secret, "key expansion", server random +
client random), cut into the client's and server's MAC keys, write keys and IVs. TLS 1.3 (RFC
8446, 7.1-7.3): each traffic secret gives its key and IV by HKDF-Expand-Label, and a KeyUpdate
moves a direction to the next secret ("traffic upd"). HMAC and HKDF are the `cryptography`
package's (OpenSSL); nothing here is a cipher.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from amqpcap.tls.suites import Suite

HASHES = {"SHA": hashes.SHA1, "SHA256": hashes.SHA256, "SHA384": hashes.SHA384}


def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    mac = hmac.HMAC(key, HASHES[hash_name]())
    mac.update(data)
    return mac.finalize()


def prf12(hash_name: str, secret: bytes, label: bytes, seed: bytes, size: int) -> bytes:
    """TLS 1.2's PRF: P_hash(secret, label + seed) to `size` bytes (RFC 5246, 5)."""
    seed = label + seed
    out = bytearray()
    a = seed
    while len(out) < size:
        a = _hmac(hash_name, secret, a)
        out += _hmac(hash_name, secret, a + seed)
    return bytes(out[:size])


class KeyBlock12:
    """A TLS 1.2 connection's record keys, both directions (index 0: the client's writes)."""

    __slots__ = ("mac_keys", "keys", "ivs")

    def __init__(self, suite: Suite, master: bytes, client_random: bytes, server_random: bytes) -> None:
        mac, key, iv = suite.mac_bytes, suite.key_bytes, suite.fixed_iv_bytes
        block = prf12(suite.hash, master, b"key expansion", server_random + client_random, 2 * (mac + key + iv))
        at = 0

        def take(n: int) -> bytes:
            nonlocal at
            at += n
            return block[at - n:at]
        self.mac_keys = (take(mac), take(mac))
        self.keys = (take(key), take(key))
        self.ivs = (take(iv), take(iv))


_INFO: dict[tuple[bytes, bytes, int], bytes] = {}  # (label, context, length) -> HkdfLabel, made once each
_ALGORITHMS = {name: algorithm() for name, algorithm in HASHES.items()}


def _label(label: bytes, context: bytes, length: int) -> bytes:
    """HKDF-Expand-Label's info, with HKDF-Expand's first block counter (RFC 8446, 7.1; RFC 5869)."""
    info = _INFO.get((label, context, length))
    if info is None:
        full = b"tls13 " + label
        info = _INFO[(label, context, length)] = (length.to_bytes(2, "big") + bytes([len(full)]) + full
                                                  + bytes([len(context)]) + context + b"\x01")
    return info


def hkdf_expand_label(hash_name: str, secret: bytes, label: bytes, context: bytes, length: int,
                      keyed=None) -> bytes:
    """HKDF-Expand-Label (RFC 8446, 7.1). An output no longer than the hash is HKDF-Expand's first
    block, T(1) = HMAC(secret, info | 0x01) (RFC 5869, 2.3): one HMAC, without building an
    HKDFExpand object for it (a TLS 1.3 connection derives eight such keys and IVs). `keyed`: an
    HMAC already keyed with `secret`, used up here (finalized) rather than keying another."""
    info = _label(label, context, length)
    algorithm = _ALGORITHMS[hash_name]
    if length > algorithm.digest_size:
        return HKDFExpand(HASHES[hash_name](), length, info[:-1]).derive(secret)
    mac = keyed if keyed is not None else hmac.HMAC(secret, algorithm)
    mac.update(info)
    return mac.finalize()[:length]


def traffic_keys13(suite: Suite, secret: bytes) -> tuple[bytes, bytes]:
    """(write key, write IV) of a TLS 1.3 traffic secret (one HMAC keyed with it: a copy for the
    key, itself for the IV; keying is most of an HMAC's cost here)."""
    keyed = hmac.HMAC(secret, _ALGORITHMS[suite.hash])
    return (hkdf_expand_label(suite.hash, secret, b"key", b"", suite.key_bytes, keyed.copy()),
            hkdf_expand_label(suite.hash, secret, b"iv", b"", 12, keyed))


def next_secret13(suite: Suite, secret: bytes) -> bytes:
    """The traffic secret after a KeyUpdate (RFC 8446, 7.2)."""
    return hkdf_expand_label(suite.hash, secret, b"traffic upd", b"", len(secret))
