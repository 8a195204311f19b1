"""AMQPS in the lake (issue 53): the TLS samples through the whole job with their key logs (the
session's `lake`, as `make run` builds it): a tls_connections row per TLS connection telling its
handshake as the recording knew it; its frames decrypted, marked tls, the same methods the client
sent; its streams, connections and decode_issues rows marked, and every byte of it accounted at
both layers (the TCP stream's in TLS records or the TLS layer's issues, the decrypted stream's in
frames or the AMQP layer's)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from amqpcap.lake.spark_read import read_table
from tests.helpers.samples import EXPECTED, capture_for, uri

TLS = [p for p in EXPECTED if p.parent.name == "tls"]
IDS = [p.name.removesuffix(".expected.json") for p in TLS]


def port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def tls_layer(issue) -> bool:
    """An issue of the TLS layer (its bytes the TCP stream's), not of the AMQP one above it."""
    return issue.issue_kind.startswith("tls-") or issue.issue_kind == "retransmission-conflict"


def recorded(expected_path):
    """Each connection the sample's recording describes: ((capture, client port), its facts)."""
    capture = uri(capture_for(expected_path))
    for known in json.loads(expected_path.read_text())["tls"]:
        yield (capture, known["client_port"]), known


@pytest.fixture(scope="module")
def tables(spark, lake):
    """Each table's rows of the TLS samples, by (capture, client port)."""
    path, _ = lake
    captures = [uri(capture_for(p)) for p in TLS]
    out = {}
    for name in ("tls_connections", "streams", "connections", "decode_issues", "frames"):
        table = read_table(spark, path, name)
        rows = table.where(table.capture.isin(captures)).collect()
        grouped: dict[tuple, list] = {}
        for row in rows:
            grouped.setdefault((row.capture, port(row.client)), []).append(row)
        out[name] = grouped
    return out


@pytest.mark.parametrize("expected_path", TLS, ids=IDS)
def test_each_tls_connection_has_its_row_as_it_was(tables, expected_path):
    for key, known in recorded(expected_path):
        rows = tables["tls_connections"].get(key, [])
        if not known["tls"]:
            assert rows == [], key  # the plain connection beside them
            continue
        [row] = rows
        for name in ("version", "cipher_suite", "sni", "alpn_offered", "resumed", "hello_retry", "key_logged"):
            assert row[name] == known[name], (key, name)
        assert row.decrypted == known["key_logged"], key
        if known["key_logged"] or known["version"] == "TLSv1.2":  # (TLS 1.3 says it encrypted)
            assert row.alpn == known["alpn"], key
        if "CBC" in known["cipher_suite"]:
            assert row.encrypt_then_mac == known["encrypt_then_mac"], key
        if known["key_logged"] and known["key_updates"]:
            assert (row.c2s_key_updates, row.s2c_key_updates) == (
                known["key_updates"]["C>S"], known["key_updates"]["S>C"]), key
        assert row.client_hello_at <= row.server_hello_at <= row.handshake_done_at, key
        assert row.handshake_ms >= 0 and row.c2s_records > 0 and row.s2c_records > 0, key


@pytest.mark.parametrize("expected_path", TLS, ids=IDS)
def test_decrypted_frames_are_the_clients_methods_marked_tls(tables, expected_path):
    for key, known in recorded(expected_path):
        frames = tables["frames"].get(key, [])
        methods = {d: Counter(r.method for r in frames if r.kind == "method" and r.direction == d)
                   for d in ("C>S", "S>C")}
        if not known["tls"]:
            assert methods == known["methods"] and {r.tls for r in frames} == {None}, key
        elif known["key_logged"]:
            assert methods == known["methods"] and {r.tls for r in frames} == {True}, key
            assert max(r.body_size or 0 for r in frames) >= known["large_body_bytes"], key
        else:
            assert frames == [], key  # counted, not decoded: no frame is made up


@pytest.mark.parametrize("expected_path", TLS, ids=IDS)
def test_streams_connections_and_issues_of_a_tls_connection_add_up(tables, expected_path):
    for key, known in recorded(expected_path):
        [stream] = tables["streams"][key]
        connections = tables["connections"].get(key, [])
        if not known["tls"]:
            assert stream.tls is False and [c.tls for c in connections] == [False], key
            continue
        [tls] = tables["tls_connections"][key]
        assert stream.tls is True and stream.client_decided_by == "TLS ClientHello", key
        assert stream.status == ("amqp" if known["key_logged"] else "tls"), key
        [connection] = connections  # (a connection without its keys is a row too, its status tls)
        assert connection.tls is True and connection.status == stream.status, key
        issues = tables["decode_issues"].get(key, [])
        assert {i.tls for i in issues} <= {True}, key
        for prefix, direction in (("c2s", "C>S"), ("s2c", "S>C")):
            stream_bytes, decoded, skipped = (stream[f"{prefix}_{n}"] for n in ("stream_bytes", "decoded_bytes",
                                                                                "skipped_bytes"))
            assert stream_bytes == tls[f"{prefix}_bytes"], key
            layer = [i for i in issues if i.direction == direction and tls_layer(i)]
            assert sum(i.bytes_skipped for i in layer) == tls[f"{prefix}_skipped_bytes"], key
            amqp = [i for i in issues if i.direction == direction and not tls_layer(i)]
            assert sum(i.bytes_skipped for i in amqp) == skipped, key
            if known["key_logged"]:  # the decrypted stream: every byte in a frame, or an issue
                assert decoded + skipped >= tls[f"{prefix}_plaintext_bytes"] > 0, key
                assert decoded == sum(f.frame_bytes for f in tables["frames"][key] if f.direction == direction), key
            else:
                assert decoded == 0 and tls[f"{prefix}_skipped_bytes"] > 0, key
