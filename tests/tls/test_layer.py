"""The TLS layer (amqpcap.tls.layer) on crafted conversations: a known AMQP conversation carried by
OpenSSL's own TLS (Python's ssl, through memory; tests/helpers/tls.py) in every version, suite and
MAC order, decoded with its key log, against the same conversation in clear; cut into segments of
any size, with segments the capture lost, without keys, resumed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import pytest

from amqpcap.connection.decoder import CaptureDecoder
from amqpcap.tls.keylog import KeyLog, read_key_logs
from tests.helpers.samples import ROOT
from tests.helpers.tls import ISSUER, SNI, SUBJECT, contexts, conversation, tls_capture
from tools import craft_samples as craft

FRAMES = craft.conversation(large_body=140_000)
SMALL = craft.conversation(large_body=3000)
# (version, OpenSSL cipher string, encrypt-then-MAC, the suite's IANA name)
SUITES = [
    ("TLSv1.3", None, True, None),
    ("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256", True, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
    ("TLSv1.2", "ECDHE-RSA-AES256-GCM-SHA384", True, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"),
    ("TLSv1.2", "ECDHE-RSA-CHACHA20-POLY1305", True, "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"),
    ("TLSv1.2", "AES128-GCM-SHA256", True, "TLS_RSA_WITH_AES_128_GCM_SHA256"),
    ("TLSv1.2", "ECDHE-RSA-AES128-SHA", True, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"),
    ("TLSv1.2", "ECDHE-RSA-AES128-SHA", False, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"),
    ("TLSv1.2", "ECDHE-RSA-AES128-SHA256", True, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256"),
    ("TLSv1.2", "ECDHE-RSA-AES256-SHA384", False, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384"),
    ("TLSv1.2", "AES256-SHA", False, "TLS_RSA_WITH_AES_256_CBC_SHA"),
    ("TLSv1.2", "AES128-CCM", True, "TLS_RSA_WITH_AES_128_CCM"),
    ("TLSv1.2", "AES256-CCM8", True, "TLS_RSA_WITH_AES_256_CCM_8"),
]
IDS = [f"{v}-{c or 'default'}-{'etm' if e else 'mte'}" for v, c, e, _ in SUITES]


def decode(path, keys: KeyLog | None = None):
    decoder = CaptureDecoder(collect_connections=True, keys=keys if keys is not None else KeyLog())
    return list(decoder.decode([str(path)])), decoder.stats


def story(records) -> list[tuple]:
    """What a conversation said, per record, wherever its bytes were: no offsets, times or packets."""
    out = []
    for r in records:
        if r["kind"] == "issue":
            continue
        message = r.get("message") or {}
        out.append((r["dir"], r["kind"], r["channel"], r.get("method"), repr(r.get("args")),
                    message.get("body_sha256"), message.get("complete")))
    return out


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """The conversation in clear."""
    path = tmp_path_factory.mktemp("plain") / "plain.pcap"
    craft.write_pcap(path, craft.tcp_packets(craft.Capture("plain", "", craft.segments_of(FRAMES), FRAMES)))
    return decode(path)[0]


@pytest.mark.parametrize("version, ciphers, etm, name", SUITES, ids=IDS)
def test_every_suite_decrypts_to_the_conversation_in_clear(tmp_path, plain, version, ciphers, etm, name):
    capture = tls_capture(tmp_path, "c", FRAMES, version=version, ciphers=ciphers, etm=etm, alpn=["amqp"])
    records, stats = decode(capture.path, read_key_logs([str(capture.keylog)]))
    assert story(records) == story(plain)
    assert [r for r in records if r["kind"] == "issue"] == []
    assert all(r["tls"] is True for r in records)
    (summary,) = stats.connection_summaries
    tls = summary["tls"]
    assert summary["status"] == "amqp" and summary["client_decided_by"] == "TLS ClientHello"
    assert tls["version"] == version and tls["sni"] == SNI and tls["alpn_offered"] == ["amqp"]
    assert tls["alpn"] == "amqp" and tls["key_logged"] and tls["decrypted"]
    assert (tls["cert_subject"], tls["cert_issuer"]) == (SUBJECT, ISSUER)
    if name is not None:
        assert tls["cipher_suite"] == name
    else:  # (TLS 1.3: OpenSSL's choice)
        assert tls["cipher_suite"] == capture.cipher[0]
    if version == "TLSv1.2":
        assert tls["encrypt_then_mac"] is (etm and "CBC" in name)
    for direction, facts in summary["directions"].items():
        assert facts["decoded_bytes"] == len(capture.plain[direction]) == tls["directions"][direction]["plaintext_bytes"]


@pytest.mark.parametrize("suite", ["TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"])
def test_tls13_ccm_suites_decrypt_to_the_conversation_in_clear(tmp_path, plain, suite):
    """TLS 1.3's CCM suites, which OpenSSL offers only when configured to (Python's ssl cannot choose
    TLS 1.3 suites: the capture is made in a process of its own, under an OpenSSL configuration)."""
    conf = tmp_path / "openssl.cnf"
    conf.write_text("openssl_conf = default_conf\n[default_conf]\nssl_conf = ssl_sect\n[ssl_sect]\n"
                    "system_default = system_default_sect\n[system_default_sect]\n"
                    f"Ciphersuites = {suite}\n")
    script = ("import sys; from pathlib import Path; from tests.helpers.tls import tls_capture; "
              "from tests.tls.test_layer import FRAMES; "
              "print(tls_capture(Path(sys.argv[1]), 'c', FRAMES, version='TLSv1.3').cipher[0])")
    made = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "OPENSSL_CONF": str(conf), "PYTHONPATH": str(ROOT)}, check=True)
    assert made.stdout.strip() == suite  # (what the test is about)
    records, stats = decode(tmp_path / "c.pcap", read_key_logs([str(tmp_path / "c.keys")]))
    assert story(records) == story(plain)
    assert [r for r in records if r["kind"] == "issue"] == []
    assert stats.connection_summaries[0]["tls"]["cipher_suite"] == suite


@pytest.mark.parametrize("mss", [1, 5, 100, 1 << 20])
def test_segments_of_any_size_give_the_same_records(tmp_path, plain, mss, monkeypatch):
    """Records split over many segments (one byte each: every header too), or many records in one."""
    import tests.helpers.tls as helper
    monkeypatch.setattr(helper, "MSS", mss)
    capture = helper.tls_capture(tmp_path, "c", FRAMES if mss > 5 else SMALL, version="TLSv1.3")
    records, _ = decode(capture.path, read_key_logs([str(capture.keylog)]))
    assert [r for r in records if r["kind"] == "issue"] == []
    if mss > 5:
        assert story(records) == story(plain)
    else:
        assert sum(r["kind"] == "method" for r in records) == sum(f.name not in ("header", "body", "heartbeat",
                                                                             "protocol-header") for f in SMALL)


def test_frame_records_name_the_packet_that_completes_their_tls_record(tmp_path):
    """A frame's pcap_record_last is the packet holding the last byte of the TLS record that holds
    its last byte (where Wireshark shows it), not of the frame itself."""
    capture = tls_capture(tmp_path, "c", SMALL, version="TLSv1.2", ciphers="ECDHE-RSA-AES128-GCM-SHA256")
    records, _ = decode(capture.path, read_key_logs([str(capture.keylog)]))
    packets = {}  # stream offset of each segment's last byte -> its record number (handshake: 3 packets before)
    number = 4
    for segment in capture.segments:
        packets.setdefault(segment.direction, []).append((segment.seq_offset + len(segment.data), number))
        number += 1
    for r in records:
        if r["kind"] == "method":
            assert r["pcap_record_last"] in {n for _, n in packets[r["dir"]]}


@pytest.mark.parametrize("version, ciphers, etm, name", [SUITES[0], SUITES[1], SUITES[3], SUITES[6]],
                         ids=[IDS[0], IDS[1], IDS[3], IDS[6]])
@pytest.mark.parametrize("drop", [(30,), (30, 31, 32, 33), (100, 101, 102, 103, 104, 105, 106, 107, 108, 109)])
def test_records_lost_in_a_gap_cost_only_their_bytes(tmp_path, plain, version, ciphers, etm, name, drop):
    """Segments the capture lost inside the large message: framing goes on after the cut record
    (its length was known) or resynchronises, decryption goes on at the sequence number that opens
    the next record, and the decrypted stream is told how much it lost: exactly, where the
    protection's overhead is fixed, so the body frame keeps its framing and every method after it
    is decoded."""
    capture = tls_capture(tmp_path, "c", FRAMES, drop=drop, version=version, ciphers=ciphers, etm=etm, max_record=2000)
    records, stats = decode(capture.path, read_key_logs([str(capture.keylog)]))
    issues = [r for r in records if r["kind"] == "issue"]
    tls_gaps = [r for r in issues if r["issue_kind"] == "tls-gap"]
    assert len(tls_gaps) == 1 and "decryption" in tls_gaps[0]["detail"]
    assert sum(len(capture.segments[i].data) for i in drop) <= tls_gaps[0]["bytes_skipped"]
    methods = Counter(r["method"] for r in records if r["kind"] == "method")
    assert methods == Counter(r[3] for r in story(plain) if r[1] == "method")
    (summary,) = stats.connection_summaries
    if len(drop) < 10:  # inside the body frame: its framing kept, the message incomplete, nothing else lost
        (gap,) = [r for r in issues if r["issue_kind"] == "gap"]
        assert "framing kept" in gap["detail"]
        assert {r["issue_kind"] for r in issues} == {"tls-gap", "gap"}
        # what the lost records held of the body, exactly: 2000 bytes each (max_record)
        assert gap["bytes_skipped"] % 2000 == 0
        assert gap["bytes_skipped"] == summary["tls"]["directions"]["C>S"]["lost_plaintext_bytes"]
    for direction, facts in summary["directions"].items():
        layer = summary["tls"]["directions"][direction]
        assert facts["stream_bytes"] == layer["record_bytes"] + layer["skipped_bytes"]
        assert layer["plaintext_bytes"] + layer["lost_plaintext_bytes"] == facts["decoded_bytes"] + facts["skipped_bytes"]


@pytest.mark.parametrize("version, ciphers, etm, name", [SUITES[0], SUITES[1], SUITES[6]], ids=[IDS[0], IDS[1], IDS[6]])
def test_without_keys_the_handshake_is_still_told(tmp_path, version, ciphers, etm, name):
    capture = tls_capture(tmp_path, "c", FRAMES, version=version, ciphers=ciphers, etm=etm, alpn=["amqp"])
    records, stats = decode(capture.path)
    (summary,) = stats.connection_summaries
    tls = summary["tls"]
    assert summary["status"] == "tls" and not tls["decrypted"] and not tls["key_logged"]
    assert tls["version"] == version and tls["sni"] == SNI and tls["alpn_offered"] == ["amqp"]
    assert tls["cert_subject"] == (SUBJECT if version == "TLSv1.2" else None)  # (TLS 1.3 encrypts it)
    assert tls["alpn"] == ("amqp" if version == "TLSv1.2" else None)
    assert tls["handshake_done_ns"] is not None and tls["handshake_ms"] >= 0
    assert Counter((r["issue_kind"], r["dir"]) for r in records) == {("tls-not-decoded", "C>S"): 1,
                                                                       ("tls-not-decoded", "S>C"): 1}
    assert all("no key log line for its client random" in r["detail"] for r in records)
    for direction, facts in summary["directions"].items():
        layer = tls["directions"][direction]
        assert facts["stream_bytes"] == layer["record_bytes"] + layer["skipped_bytes"]
        assert sum(r["bytes_skipped"] for r in records if r["dir"] == direction) == layer["skipped_bytes"]


def test_a_key_log_of_other_connections_decrypts_nothing(tmp_path):
    capture = tls_capture(tmp_path, "c", SMALL, version="TLSv1.3")
    other = tls_capture(tmp_path, "d", SMALL, version="TLSv1.3")
    records, stats = decode(capture.path, read_key_logs([str(other.keylog)]))
    assert {r["issue_kind"] for r in records} == {"tls-not-decoded"}


def _two_connections(tmp_path, name: str, first_chunks, second_chunks) -> str:
    from tests.helpers.tls import segments
    packets = []
    for port, chunks in ((41001, first_chunks), (41002, second_chunks)):
        packets += craft.tcp_packets(craft.Capture(name, "", segments(chunks), []), server=("10.1.0.9", 5671),
                                     sport=port)
    path = tmp_path / f"{name}.pcap"
    craft.write_pcap(path, packets)
    return path


@pytest.mark.parametrize("tickets", [False, True], ids=["session-id", "ticket"])
def test_a_resumed_tls12_session_is_decrypted_with_the_master_secret_of_the_one_it_resumes(tmp_path, tickets):
    """TLS 1.2 resumption whose own client random the key log lacks: the decoder saw the session
    established earlier in the same input, and takes its master secret from there."""
    import ssl
    keys = tmp_path / "first.keys"
    pair = contexts("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256", keylog=keys,
                    server_options=0 if tickets else ssl.OP_NO_TICKET)
    first_chunks, _, first = conversation(SMALL, pair)
    pair[0].keylog_filename = None  # (the resumed connection's own line is not in the key log)
    second_chunks, _, second = conversation(SMALL, pair, session=first.session)
    assert second.session_reused
    path = _two_connections(tmp_path, "resumed", first_chunks, second_chunks)
    records, stats = decode(path, read_key_logs([str(keys)]))
    first_summary, second_summary = sorted(stats.connection_summaries, key=lambda s: s["client"])
    assert second_summary["tls"]["resumed"] == ("ticket" if tickets else "session-id")
    assert not second_summary["tls"]["key_logged"] and second_summary["tls"]["decrypted"]
    assert [r for r in records if r["kind"] == "issue"] == []
    per = Counter(r["connection"] for r in records if r["kind"] == "method")
    assert per[first_summary["connection"]] == per[second_summary["connection"]] > 20


def _reordered(tmp_path, capture, order) -> str:
    """The capture's segments in another order (the same bytes of each direction: a capture whose
    clock or interfaces put one side's packets early)."""
    segments = [capture.segments[i] for i in order] + [s for i, s in enumerate(capture.segments) if i not in order]
    path = tmp_path / "reordered.pcap"
    craft.write_pcap(path, craft.tcp_packets(craft.Capture("r", "", segments, []), server=("10.1.0.9", 5671)))
    return path


@pytest.mark.parametrize("version, ciphers, etm, name", [SUITES[0], SUITES[1]], ids=[IDS[0], IDS[1]])
def test_a_side_that_shows_up_before_the_hello_its_keys_hang_on_waits_for_it(tmp_path, plain, version, ciphers, etm,
                                                                              name):
    """Fuzz findings: the server's flight before the client's ClientHello (the ServerHello's keys
    need the client's random), and the client's records after its hello before the server's hello
    (its keys need the server's): held until that hello comes, then read in order."""
    capture = tls_capture(tmp_path, "c", FRAMES, version=version, ciphers=ciphers, etm=etm)
    keys = read_key_logs([str(capture.keylog)])
    first_server = next(i for i, s in enumerate(capture.segments) if s.direction == "S>C")
    second_client = next(i for i, s in enumerate(capture.segments) if s.direction == "C>S" and i > first_server)
    for order in ([first_server, 0], [0, second_client, first_server]):
        path = _reordered(tmp_path, capture, order)
        records, _ = decode(path, keys)
        assert [r for r in records if r["kind"] == "issue"] == [], order
        assert Counter(r[:4] for r in story(records)) == Counter(r[:4] for r in story(plain)), order
