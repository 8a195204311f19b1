"""Key schedules and suites (amqpcap.tls.keys, amqpcap.tls.suites) against published vectors and
an independent implementation (Scapy's TLS layer); record protection (amqpcap.tls.ciphers) on
records sealed here with the same primitives, and on damaged ones."""

from __future__ import annotations

import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from scapy.layers.tls.crypto import hkdf as scapy_hkdf
from scapy.layers.tls.crypto import prf as scapy_prf
from scapy.layers.tls.crypto.suites import _tls_cipher_suites as SCAPY_SUITES

from amqpcap.tls.ciphers import Aead12, Aead13, Cbc12, Undecryptable
from amqpcap.tls.keys import KeyBlock12, hkdf_expand_label, next_secret13, prf12, traffic_keys13
from amqpcap.tls.suites import NAMES, suite_name, suite_of


def test_suite_names_are_the_registrys():
    """Every name ours and Scapy's copy of the IANA registry both have, the same."""
    assert {i: n for i, n in NAMES.items() if i in SCAPY_SUITES} == \
        {i: SCAPY_SUITES[i] for i in NAMES if i in SCAPY_SUITES}
    assert len([i for i in NAMES if i in SCAPY_SUITES]) >= 35
    assert suite_name(0xFFFE) == "0xfffe"


@pytest.mark.parametrize("suite_id, cipher, key, aead, hash_name, mac, explicit", [
    (0x1301, "AES_128_GCM", 16, True, "SHA256", None, 0), (0x1302, "AES_256_GCM", 32, True, "SHA384", None, 0),
    (0x1303, "CHACHA20_POLY1305", 32, True, "SHA256", None, 0),
    (0xC02F, "AES_128_GCM", 16, True, "SHA256", None, 8), (0xC030, "AES_256_GCM", 32, True, "SHA384", None, 8),
    (0xCCA8, "CHACHA20_POLY1305", 32, True, "SHA256", None, 0), (0x009C, "AES_128_GCM", 16, True, "SHA256", None, 8),
    (0xC013, "AES_128_CBC", 16, False, "SHA256", "SHA", 16), (0xC027, "AES_128_CBC", 16, False, "SHA256", "SHA256", 16),
    (0xC028, "AES_256_CBC", 32, False, "SHA384", "SHA384", 16), (0xC0AC, "AES_128_CCM", 16, True, "SHA256", None, 8),
])
def test_what_decrypting_takes_is_read_from_the_name(suite_id, cipher, key, aead, hash_name, mac, explicit):
    suite = suite_of(suite_id)
    assert (suite.cipher, suite.key_bytes, suite.aead, suite.hash, suite.mac, suite.explicit_nonce_bytes) == \
        (cipher, key, aead, hash_name, mac, explicit)
    assert suite_of(0x000A).cipher is None  # 3DES: named, not decrypted


def test_tls12_prf_vector():
    """The TLS 1.2 PRF (SHA-256) test vector published on the IETF TLS list."""
    out = prf12("SHA256", bytes.fromhex("9bbe436ba940f017b17652849a71db35"), b"test label",
                bytes.fromhex("a0ba9f936cda311827a6f796ffd5198c"), 100)
    assert out.hex().startswith("e3f229ba727be17b8d122620557cd453c2aab21d07c3d495329b52d4e61edb5a")
    assert out.hex().endswith("5110fff70187347b66")


@pytest.mark.parametrize("suite_id", [0xC02F, 0xC030, 0xCCA8, 0xC013, 0xC027, 0xC028])
def test_tls12_key_block_equals_scapys(suite_id):
    suite = suite_of(suite_id)
    master, client_random, server_random = os.urandom(48), os.urandom(32), os.urandom(32)
    block = KeyBlock12(suite, master, client_random, server_random)
    size = 2 * (suite.mac_bytes + suite.key_bytes + suite.fixed_iv_bytes)
    theirs = scapy_prf.PRF(suite.hash.lower(), 0x0303).derive_key_block(master, server_random, client_random, size)
    ours = b"".join(block.mac_keys + block.keys + block.ivs)
    assert ours == theirs


def test_tls13_traffic_keys_rfc8448():
    """RFC 8448, 3 (a simple 1-RTT handshake): the server's handshake traffic key and IV."""
    secret = bytes.fromhex("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38")
    key, iv = traffic_keys13(suite_of(0x1301), secret)
    assert (key.hex(), iv.hex()) == ("3fce516009c21727d0f2e4e86ee403bc", "5d313eb2671276ee13000b30")


@pytest.mark.parametrize("hash_name, size", [("SHA256", 32), ("SHA384", 48)])
def test_tls13_expand_label_and_key_update_equal_scapys(hash_name, size):
    secret = os.urandom(size)
    theirs = scapy_hkdf.TLS13_HKDF(hash_name.lower())
    assert hkdf_expand_label(hash_name, secret, b"key", b"", 16) == theirs.expand_label(secret, b"key", b"", 16)
    suite = suite_of(0x1301 if size == 32 else 0x1302)
    assert next_secret13(suite, secret) == theirs.expand_label(secret, b"traffic upd", b"", size)


def _header(ctype: int, length: int) -> bytes:
    return bytes([ctype, 3, 3]) + length.to_bytes(2, "big")


def test_tls13_record_opens_and_strips_its_padding():
    suite = suite_of(0x1303)
    key, iv = os.urandom(32), os.urandom(12)
    inner = b"AMQP frames" + bytes([23]) + bytes(5)  # content, its type, zero padding
    nonce = (int.from_bytes(iv, "big") ^ 7).to_bytes(12, "big")
    header = _header(23, len(inner) + 16)
    sealed = ChaCha20Poly1305(key).encrypt(nonce, inner, header)
    protection = Aead13(suite, key, iv)
    assert protection.open(7, header, sealed) == b"AMQP frames" and protection.content_type == 23
    with pytest.raises(Undecryptable):
        Aead13(suite, key, iv).open(8, header, sealed)  # the wrong sequence number
    with pytest.raises(Undecryptable):
        Aead13(suite, key, iv).open(7, header, sealed[:-1] + bytes([sealed[-1] ^ 1]))  # a bit flipped
    with pytest.raises(Undecryptable):
        Aead13(suite, key, iv).open(0, header, b"short")


def test_tls12_gcm_record_carries_its_explicit_nonce():
    suite = suite_of(0xC02F)
    key, salt, explicit = os.urandom(16), os.urandom(4), (41).to_bytes(8, "big")
    plain = b"x" * 100
    aad = (41).to_bytes(8, "big") + bytes([23, 3, 3]) + len(plain).to_bytes(2, "big")
    fragment = explicit + AESGCM(key).encrypt(salt + explicit, plain, aad)
    assert Aead12(suite, key, salt).open(41, _header(23, len(fragment)), fragment) == plain
    with pytest.raises(Undecryptable):
        Aead12(suite, key, salt).open(40, _header(23, len(fragment)), fragment)


def test_tls12_cbc_checks_padding_and_mac_either_way():
    """MAC-then-encrypt and encrypt-then-MAC records sealed with OpenSSL's primitives open; a
    wrong MAC key or sequence number does not."""
    from cryptography.hazmat.primitives import hashes, hmac
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    suite = suite_of(0xC027)  # AES_128_CBC_SHA256
    key, mac_key, iv = os.urandom(16), os.urandom(32), os.urandom(16)

    def mac(data: bytes, seq: int) -> bytes:
        h = hmac.HMAC(mac_key, hashes.SHA256())
        h.update(seq.to_bytes(8, "big") + bytes([23, 3, 3]) + len(data).to_bytes(2, "big") + data)
        return h.finalize()

    def encrypt(data: bytes) -> bytes:
        pad = 15 - len(data) % 16
        encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
        return encryptor.update(data + bytes([pad]) * (pad + 1)) + encryptor.finalize()
    plain = b"basic.publish" * 7
    mte = iv + encrypt(plain + mac(plain, 3))
    assert Cbc12(suite, key, mac_key, etm=False).open(3, _header(23, len(mte)), mte) == plain
    sealed = iv + encrypt(plain)
    etm = sealed + mac(sealed, 3)
    assert Cbc12(suite, key, mac_key, etm=True).open(3, _header(23, len(etm)), etm) == plain
    for record, etm_on in ((mte, False), (etm, True)):
        with pytest.raises(Undecryptable):
            Cbc12(suite, key, mac_key, etm_on).open(4, _header(23, len(record)), record)
        with pytest.raises(Undecryptable):
            Cbc12(suite, key, os.urandom(32), etm_on).open(3, _header(23, len(record)), record)
