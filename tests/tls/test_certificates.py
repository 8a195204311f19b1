"""A server certificate's facts (tls_connections' cert_* columns), kept by DER for the next
connection to the same broker: each certificate still gets its own, whichever came before."""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from amqpcap.tls import handshake
from amqpcap.tls.handshake import certificate_facts


def _certificate(name: str, days: int) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "amqpcap test CA")])
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(start)
            .not_valid_after(start + datetime.timedelta(days=days)).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.DER)


def test_each_certificate_has_its_own_facts_whatever_came_before():
    ders = [_certificate(f"rabbit-{i}", 10 + i) for i in range(handshake._FACTS_KEPT + 3)]  # (past what is kept)
    for _ in range(2):
        for i, der in enumerate(ders):
            facts = certificate_facts(der)
            assert (facts.subject, facts.issuer) == (f"CN=rabbit-{i}", "CN=amqpcap test CA")
            assert facts.not_after_us - facts.not_before_us == (10 + i) * 86_400 * 10**6
    assert len(handshake._FACTS) <= handshake._FACTS_KEPT


def test_what_does_not_parse_is_still_named_by_its_digest():
    facts = certificate_facts(b"\x30\x03not a certificate")
    assert facts.subject is None and len(facts.sha256) == 64
