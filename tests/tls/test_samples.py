"""The recorded TLS samples (data/samples/tls/: RabbitMQ's own TLS listener, stunnel's OpenSSL in
front of it; pika, a raw Python client, Go's amqp091 with crypto/tls, Node's amqplib): what each
TLS connection's handshake was, as the scenario knew it by construction, against what the decoder
says of it with the sample's key log, and without it."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from amqpcap.connection.decoder import CaptureDecoder
from amqpcap.tls.keylog import KeyLog
from tests.helpers.samples import EXPECTED, capture_for, decoded

TLS = [p for p in EXPECTED if p.parent.name == "tls"]
IDS = [p.name.removesuffix(".expected.json") for p in TLS]


def by_port(summaries: list[dict]) -> dict[int, dict]:
    return {int(s["client"].rsplit(":", 1)[1]): s for s in summaries}


def test_the_samples_cover_what_the_issue_names():
    """TLS 1.2 GCM, ChaCha20 and CBC (with and without encrypt-then-MAC), RSA key exchange, TLS 1.3's
    three suites, resumption by session id, ticket and PSK, a HelloRetryRequest, KeyUpdates, two
    TLS connections where the key log covers one, plain and TLS in one capture, other libraries."""
    connections = [c for p in TLS for c in json.loads(p.read_text())["tls"] if c["tls"]]
    suites = {c["cipher_suite"] for c in connections}
    assert {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            "TLS_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
            "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
            "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"} <= suites
    assert {c["encrypt_then_mac"] for c in connections if "CBC" in c["cipher_suite"]} == {True, False}
    assert {c["resumed"] for c in connections} >= {"session-id", "ticket", "psk", None}
    assert any(c["hello_retry"] for c in connections)
    assert any(c["key_updates"] and sum(c["key_updates"].values()) for c in connections)
    assert any(not c["key_logged"] for c in connections)
    assert len({c["client_library"].split()[0] for c in connections}) >= 3


@pytest.mark.parametrize("expected_path", TLS, ids=IDS)
def test_each_tls_connection_is_told_as_it_was(expected_path):
    facts, _, stats = decoded(expected_path)
    ours = by_port(stats.connection_summaries)
    for known in facts["tls"]:
        summary = ours[known["client_port"]]
        if not known["tls"]:
            assert "tls" not in summary and summary["status"] == "amqp"
            continue
        tls = summary["tls"]
        assert summary["client_decided_by"] == "TLS ClientHello"
        for name in ("version", "cipher_suite", "sni", "alpn_offered", "resumed", "hello_retry", "key_logged"):
            assert tls[name] == known[name], (known["client_port"], name)
        # the certificate: sent in clear by TLS 1.2, encrypted by 1.3; not sent at all on resumption
        seen = (known["key_logged"] or known["version"] == "TLSv1.2") and not known["resumed"]
        for name in ("cert_subject", "cert_issuer"):
            assert tls[name] == (known[name] if seen else None), (known["client_port"], name)
        if tls["version"] == "TLSv1.2" and "CBC" in tls["cipher_suite"]:
            assert tls["encrypt_then_mac"] == known["encrypt_then_mac"]
        if known["key_logged"]:
            assert tls["alpn"] == known["alpn"] and tls["decrypted"]
            assert summary["status"] == "amqp"
            if known["key_updates"] is not None:
                assert {d: v["key_updates"] for d, v in tls["directions"].items()} == known["key_updates"]
        else:
            assert not tls["decrypted"] and summary["status"] == "tls"
        assert tls["client_hello_ns"] <= tls["server_hello_ns"] <= tls["handshake_done_ns"]
        assert 0 < tls["handshake_ms"] < 10_000


@pytest.mark.parametrize("expected_path", TLS, ids=IDS)
def test_each_connection_carries_its_own_methods(expected_path):
    """Per TLS connection (by its client port), the methods its scenario made: those the key log
    covers decoded, the others none."""
    facts, records, stats = decoded(expected_path)
    ids = {c: s["connection"] for c, s in by_port(stats.connection_summaries).items()}
    for known in facts["tls"]:
        methods = {"C>S": Counter(), "S>C": Counter()}
        for r in records:
            if r["kind"] == "method" and r["connection"] == ids[known["client_port"]]:
                methods[r["dir"]][r["method"]] += 1
                assert r.get("tls") is (True if known["tls"] else None)
        want = known["methods"] if known["key_logged"] or not known["tls"] else {"C>S": {}, "S>C": {}}
        assert {d: dict(c) for d, c in methods.items()} == want, known["client_port"]


@pytest.mark.parametrize("expected_path", TLS, ids=IDS)
def test_without_the_key_log_every_tls_connection_is_still_a_row(expected_path):
    """No keys: the handshake's facts (all of TLS 1.2's, TLS 1.3's clear ones), no frame of a TLS
    connection, and every encrypted byte counted in one tls-not-decoded issue per direction."""
    facts = json.loads(expected_path.read_text())
    decoder = CaptureDecoder(collect_connections=True, keys=KeyLog())
    records = list(decoder.decode([str(capture_for(expected_path))]))
    ours = by_port(decoder.stats.connection_summaries)
    for known in facts["tls"]:
        summary = ours[known["client_port"]]
        if not known["tls"]:
            continue
        tls = summary["tls"]
        assert summary["status"] == "tls" and not tls["key_logged"] and not tls["decrypted"]
        for name in ("version", "cipher_suite", "sni", "alpn_offered", "resumed", "hello_retry"):
            assert tls[name] == known[name], (known["client_port"], name)
        tls12 = known["version"] == "TLSv1.2"
        assert tls["cert_subject"] == (known["cert_subject"] if tls12 and not known["resumed"] else None)
        assert tls["handshake_done_ns"] is not None
        mine = [r for r in records if r["connection"] == summary["connection"]]
        assert {r["kind"] for r in mine} == {"issue"}
        kinds = Counter((r["issue_kind"], r["dir"]) for r in mine)
        assert kinds[("tls-not-decoded", "C>S")] == 1 and kinds[("tls-not-decoded", "S>C")] == 1
        for direction, facts_of in summary["directions"].items():
            layer = tls["directions"][direction]
            assert facts_of["stream_bytes"] == layer["record_bytes"] + layer["skipped_bytes"]
            assert layer["plaintext_bytes"] == 0
