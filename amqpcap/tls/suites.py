"""TLS cipher suites: the IANA registry's names for the suites seen on broker ports, and what
decrypting each takes, read from its name (`TLS_<key exchange>_WITH_<cipher>_<hash>`; TLS 1.3's
`TLS_<cipher>_<hash>`), so the parameters have one source: the name.

    suite = suite_of(0xC02F)   # Suite(name='TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', cipher='AES_128_GCM', ...)
    suite_name(0x1301)         # 'TLS_AES_128_GCM_SHA256'; an id not listed: '0x1a2b'

The names are the registry's (https://www.iana.org/assignments/tls-parameters, "TLS Cipher
Suites"); a test compares them with Scapy's own copy of the registry.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

# id -> IANA name: every suite a broker or client of our time offers by default, and the older
# ones an operator may still meet (their names are told even where they are not decrypted).
NAMES = {
    0x1301: "TLS_AES_128_GCM_SHA256", 0x1302: "TLS_AES_256_GCM_SHA384", 0x1303: "TLS_CHACHA20_POLY1305_SHA256",
    0x1304: "TLS_AES_128_CCM_SHA256", 0x1305: "TLS_AES_128_CCM_8_SHA256",
    0x000A: "TLS_RSA_WITH_3DES_EDE_CBC_SHA", 0x002F: "TLS_RSA_WITH_AES_128_CBC_SHA",
    0x0033: "TLS_DHE_RSA_WITH_AES_128_CBC_SHA", 0x0035: "TLS_RSA_WITH_AES_256_CBC_SHA",
    0x0039: "TLS_DHE_RSA_WITH_AES_256_CBC_SHA", 0x003C: "TLS_RSA_WITH_AES_128_CBC_SHA256",
    0x003D: "TLS_RSA_WITH_AES_256_CBC_SHA256", 0x0067: "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256",
    0x006B: "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256", 0x009C: "TLS_RSA_WITH_AES_128_GCM_SHA256",
    0x009D: "TLS_RSA_WITH_AES_256_GCM_SHA384", 0x009E: "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256",
    0x009F: "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", 0x00FF: "TLS_EMPTY_RENEGOTIATION_INFO_SCSV",
    0x5600: "TLS_FALLBACK_SCSV",
    0xC009: "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", 0xC00A: "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    0xC013: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", 0xC014: "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    0xC023: "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", 0xC024: "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384",
    0xC027: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", 0xC028: "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
    0xC02B: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", 0xC02C: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    0xC02F: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", 0xC030: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    0xC09C: "TLS_RSA_WITH_AES_128_CCM", 0xC09D: "TLS_RSA_WITH_AES_256_CCM",
    0xC09E: "TLS_DHE_RSA_WITH_AES_128_CCM", 0xC09F: "TLS_DHE_RSA_WITH_AES_256_CCM",
    0xC0A0: "TLS_RSA_WITH_AES_128_CCM_8", 0xC0A1: "TLS_RSA_WITH_AES_256_CCM_8",
    0xC0A2: "TLS_DHE_RSA_WITH_AES_128_CCM_8", 0xC0A3: "TLS_DHE_RSA_WITH_AES_256_CCM_8",
    0xC0AC: "TLS_ECDHE_ECDSA_WITH_AES_128_CCM", 0xC0AD: "TLS_ECDHE_ECDSA_WITH_AES_256_CCM",
    0xC0AE: "TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8", 0xC0AF: "TLS_ECDHE_ECDSA_WITH_AES_256_CCM_8",
    0xCCA8: "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", 0xCCA9: "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    0xCCAA: "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
}

# The ciphers this module knows how to use: (key bytes, AEAD) by the cipher part of a name
CIPHERS = {"AES_128_GCM": (16, True), "AES_256_GCM": (32, True), "CHACHA20_POLY1305": (32, True),
           "AES_128_CCM": (16, True), "AES_256_CCM": (32, True), "AES_128_CCM_8": (16, True),
           "AES_256_CCM_8": (32, True),
           "AES_128_CBC": (16, False), "AES_256_CBC": (32, False)}
HASH_BYTES = {"SHA": 20, "SHA256": 32, "SHA384": 48}


@dataclass(frozen=True)
class Suite:
    """What decrypting records of one suite takes."""

    id: int
    name: str
    tls13: bool  # a TLS 1.3 suite (its keys come from traffic secrets, not a master secret)
    cipher: str | None  # AES_128_GCM, CHACHA20_POLY1305, AES_256_CBC ... (None: not one we decrypt)
    key_bytes: int
    aead: bool
    hash: str  # the PRF's (TLS 1.2) or HKDF's (1.3) hash: SHA256 or SHA384
    mac: str | None  # CBC suites' HMAC hash: SHA (SHA-1), SHA256, SHA384
    tag_bytes: int  # an AEAD's tag (16; 8 for CCM_8)

    @property
    def mac_bytes(self) -> int:
        return HASH_BYTES[self.mac] if self.mac else 0

    @property
    def fixed_iv_bytes(self) -> int:
        """TLS 1.2's client/server write IV from the key block: GCM and CCM's 4-byte salt,
        ChaCha20's 12 bytes; none for CBC (its IV is in each record)."""
        if self.cipher is None or not self.aead:
            return 0
        return 12 if self.cipher == "CHACHA20_POLY1305" else 4

    @property
    def explicit_nonce_bytes(self) -> int:
        """What each TLS 1.2 record carries before its ciphertext: GCM and CCM's 8-byte explicit
        nonce, CBC's 16-byte IV; ChaCha20 and TLS 1.3 carry none."""
        if self.tls13 or self.cipher is None or self.cipher == "CHACHA20_POLY1305":
            return 0
        return 8 if self.aead else 16


def suite_name(suite_id: int) -> str:
    return NAMES.get(suite_id) or f"0x{suite_id:04x}"


@functools.lru_cache(maxsize=None)  # (a suite's parameters, once: every connection asks)
def suite_of(suite_id: int) -> Suite:
    """The suite of an id: named and, where its cipher is one of CIPHERS, decryptable."""
    name = suite_name(suite_id)
    if name.startswith("TLS_") and "_WITH_" not in name and suite_id >> 8 == 0x13:  # TLS 1.3: TLS_<cipher>_<hash>
        cipher, _, hash_name = name[4:].rpartition("_")
        return _suite(suite_id, name, True, cipher, hash_name, None)
    if "_WITH_" in name:
        cipher_part = name.split("_WITH_", 1)[1]
        if cipher_part in ("AES_128_CCM", "AES_256_CCM", "AES_128_CCM_8", "AES_256_CCM_8"):
            return _suite(suite_id, name, False, cipher_part, "SHA256", None)
        cipher, _, hash_name = cipher_part.rpartition("_")
        key_bytes, aead = CIPHERS.get(cipher, (0, False))
        if aead:  # GCM, ChaCha20: the hash names the PRF's
            return _suite(suite_id, name, False, cipher, hash_name, None)
        # CBC: the hash names the HMAC; the PRF is SHA-256 unless the HMAC is SHA-384 (RFC 5246, 5289)
        return _suite(suite_id, name, False, cipher, "SHA384" if hash_name == "SHA384" else "SHA256", hash_name)
    return Suite(suite_id, name, False, None, 0, False, "SHA256", None, 0)


def _suite(suite_id: int, name: str, tls13: bool, cipher: str, hash_name: str, mac: str | None) -> Suite:
    if cipher not in CIPHERS or hash_name not in HASH_BYTES or (mac is not None and mac not in HASH_BYTES):
        return Suite(suite_id, name, tls13, None, 0, False, hash_name if hash_name in ("SHA256", "SHA384") else "SHA256",
                     None, 0)
    key_bytes, aead = CIPHERS[cipher]
    return Suite(suite_id, name, tls13, cipher, key_bytes, aead, hash_name, mac,
                 8 if cipher.endswith("_8") else 16 if aead else 0)
