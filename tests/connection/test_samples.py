"""Every sample in data/samples/ decodes to what its expected.json says: the real captures (facts
the recording scenario knows) and the crafted ones (exact by construction, skipped bytes included).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.helpers.samples import EXPECTED, decoded

IDS = [p.name.removesuffix(".expected.json") for p in EXPECTED]
CRAFTED = [p for p in EXPECTED if p.parent.name == "crafted"]
RECORDED = [p for p in EXPECTED if p.parent.name != "crafted"]
PASSWORD = "S3cr3t-Pa55w0rd!"


def methods(records, direction):
    return Counter(r["method"] for r in records if r["kind"] == "method" and r["dir"] == direction)


def not_decodable(expected, direction):
    """Frames the scenario sent malformed on purpose: a conforming decoder reports them as issues."""
    return Counter(expected.get("not_decodable", {}).get(direction, {}))


def test_samples_exist():
    assert len(EXPECTED) >= 25


@pytest.mark.parametrize("expected_path", EXPECTED, ids=IDS)
def test_methods_per_direction(expected_path):
    expected, records, _ = decoded(expected_path)
    for direction in ("C>S", "S>C"):
        want = Counter(expected["methods"][direction]) - not_decodable(expected, direction)
        assert methods(records, direction) == want, direction


@pytest.mark.parametrize("expected_path", EXPECTED, ids=IDS)
def test_connections_and_channels(expected_path):
    expected, records, stats = decoded(expected_path)
    assert len(stats.connection_summaries) == expected["connections"]
    assert len({r["connection"] for r in records} - {None}) == expected["connections"]
    assert methods(records, "S>C")["channel.open-ok"] == expected["channels_opened"]
    versions = {6 if s["server"].startswith("[") else 4 for s in stats.connection_summaries}
    assert versions == set(expected["ip_versions"])


@pytest.mark.parametrize("expected_path", EXPECTED, ids=IDS)
def test_reply_codes(expected_path):
    expected, records, _ = decoded(expected_path)
    for method, codes in expected.get("reply_codes", {}).items():
        ours = [r["args"]["reply_code"] for r in records if r["kind"] == "method" and r["method"] == method]
        assert sorted(ours) == sorted(codes), method


@pytest.mark.parametrize("expected_path", RECORDED, ids=[p.name.removesuffix(".expected.json") for p in RECORDED])
def test_messages(expected_path):
    expected, records, _ = decoded(expected_path)
    facts = expected["messages"]
    sent = [r for r in records if r["kind"] == "method" and "message" in r]
    assert sum(r["method"] == "basic.publish" for r in sent) == facts["published"]
    assert sum(r["method"] == "basic.deliver" for r in sent) == facts["delivered"]
    assert sum(r["method"] == "basic.get-ok" for r in sent) == facts["get_ok"]
    assert sum(r["method"] == "basic.return" for r in sent) == facts["returned"]
    sizes = [r["message"]["body_size"] for r in sent if r["message"]["body_size"] is not None]
    assert max(sizes, default=0) == facts["max_body_size"]


@pytest.mark.parametrize("expected_path", EXPECTED, ids=IDS)
def test_capture_metadata(expected_path):
    expected, records, stats = decoded(expected_path)
    (info,) = stats.captures
    capture = expected["capture"]
    assert info.format.replace("-ns", "") == capture["format"].replace(".gz", "+gzip")
    assert sorted(info.link_type_names) == sorted(capture["link_types"])
    want = {"us": 10**6, "ns": 10**9}[capture["timestamp_resolution"]]
    assert max(info.resolutions) == want
    mid_stream = any(not s["syn_seen"] for s in stats.connection_summaries)
    assert mid_stream == capture["starts_mid_stream"]
    assert not stats.failed


@pytest.mark.parametrize("expected_path", EXPECTED, ids=IDS)
def test_every_byte_is_decoded_or_skipped(expected_path):
    """Every byte of a TCP stream is in a frame or an issue; a TLS connection's, at each of its
    layers: every TCP byte in a whole TLS record or the TLS layer's issues, every byte of the
    decrypted stream (what decrypted, and what lost records held) in a frame or an issue."""
    _, _, stats = decoded(expected_path)
    for summary in stats.connection_summaries:
        tls = summary.get("tls")
        for direction, facts in summary["directions"].items():
            where = (summary["connection"], direction)
            if tls is None:
                assert facts["stream_bytes"] == facts["decoded_bytes"] + facts["skipped_bytes"], where
                continue
            layer = tls["directions"][direction]
            assert facts["stream_bytes"] == layer["record_bytes"] + layer["skipped_bytes"], where
            assert layer["plaintext_bytes"] + layer["lost_plaintext_bytes"] == \
                facts["decoded_bytes"] + facts["skipped_bytes"], where


def _tls_layer(record) -> bool:
    """An issue of a TLS connection's TLS layer (its bytes are the TCP stream's, not the decrypted one's)."""
    return record.get("tls") is True and (record["issue_kind"].startswith("tls-")
                                          or record["issue_kind"] == "retransmission-conflict")


@pytest.mark.parametrize("expected_path", EXPECTED, ids=IDS)
def test_issues_add_up_to_skipped_bytes(expected_path):
    _, records, stats = decoded(expected_path)
    for summary in stats.connection_summaries:
        tls = summary.get("tls")
        for direction, facts in summary["directions"].items():
            issues = [r for r in records if r["kind"] == "issue" and r["connection"] == summary["connection"]
                      and r["dir"] == direction]
            assert sum(r["bytes_skipped"] for r in issues if not _tls_layer(r)) == facts["skipped_bytes"]
            if tls is not None:
                assert sum(r["bytes_skipped"] for r in issues if _tls_layer(r)) == \
                    tls["directions"][direction]["skipped_bytes"]


@pytest.mark.parametrize("expected_path", EXPECTED, ids=IDS)
def test_no_credential_reaches_the_output(expected_path):
    expected, records, _ = decoded(expected_path)
    text = json.dumps(records, default=str)
    assert PASSWORD not in text
    users = {r["args"].get("auth_user") for r in records if r.get("method") == "connection.start-ok"}
    mechanisms = {r["args"]["mechanism"] for r in records if r.get("method") == "connection.start-ok"}
    assert mechanisms == set(expected["auth_mechanisms"])
    assert users - {None} <= set(expected["users"])


@pytest.mark.parametrize("expected_path", CRAFTED, ids=[p.name.removesuffix(".expected.json") for p in CRAFTED])
def test_crafted_frames_skips_and_issues(expected_path):
    expected, records, stats = decoded(expected_path)
    for direction in ("C>S", "S>C"):
        kinds = Counter(r["kind"] for r in records if r["dir"] == direction and r["kind"] != "issue")
        assert kinds == Counter(expected["frames"][direction]), direction
        skipped = sum(r["bytes_skipped"] for r in records if r["kind"] == "issue" and r["dir"] == direction)
        assert skipped == expected["bytes_skipped"][direction], direction
    issues = Counter(r["issue_kind"] for r in records if r["kind"] == "issue" and r["connection"] is not None)
    assert issues == Counter(expected["issues"])
    file_damage = [r["issue_kind"] for r in records if r["kind"] == "issue" and r["connection"] is None]
    assert file_damage == list(expected.get("capture_issues", {}))  # reported as records too
    incomplete = sum(1 for r in records if "message" in r and not r["message"]["complete"])
    assert incomplete == expected["incomplete_messages"]
    complete = [r for r in records if "message" in r and r["message"]["complete"]]
    assert all(len(r["message"]["body_sha256"]) == 64 for r in complete)
    assert [i.kind for i in stats.captures[0].issues] == list(expected.get("capture_issues", {}))


def test_crafted_clean_variants_decode_identically():
    """Reordered, retransmitted and wrapped-around streams give exactly the clean stream's frames,
    in the same order within each direction (across directions, reordering may shift records)."""
    def frames(name):
        path = next(p for p in CRAFTED if p.name == f"{name}.expected.json")
        _, records, _ = decoded(path)
        return {direction: [(r["kind"], r["channel"], r.get("method"), r.get("args"), r.get("message"),
                             r["offset"], r["size"]) for r in records if r["dir"] == direction]
                for direction in ("C>S", "S>C")}
    clean = frames("clean")
    for name in ("out_of_order", "retransmissions", "seq_wrap"):
        assert frames(name) == clean, name
