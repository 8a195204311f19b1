"""TLS connections carried from one run to the next (amqpcap.onepass.carry with amqpcap.tls.layer's
saved state): a TLS connection cut by the end of a run, anywhere (in its handshake, inside a
record, amid a large message), resumes in the next like a plain one, its keys found again in the
next run's key log; the saved state holds no secret and no key; a next run without the key log
says why the rest is not decrypted."""

from __future__ import annotations

import zlib
from collections import defaultdict

import pytest

from amqpcap.capture.packets import PacketParser
from amqpcap.capture.readers import read_records
from amqpcap.onepass.carry import CarryingDecoder
from amqpcap.settings import Settings
from amqpcap.tls.keylog import KeyLog, read_key_logs
from amqpcap.tls.keys import traffic_keys13
from amqpcap.tls.suites import suite_of
from tests.helpers.secrets import leaks
from tests.helpers.tls import tls_capture
from tools import craft_samples as craft

FRAMES = craft.conversation(large_body=140_000)
VERSIONS = {"tls13": dict(version="TLSv1.3"), "tls12-gcm": dict(version="TLSv1.2", ciphers="ECDHE-RSA-AES128-GCM-SHA256"),
            "tls12-cbc": dict(version="TLSv1.2", ciphers="ECDHE-RSA-AES128-SHA256", etm=False)}


def segments_of(path) -> list:
    parser, out = PacketParser(), []
    for number, (ts, link, data) in enumerate(read_records(str(path)), 1):
        segment = parser.parse(ts, link, data)
        if segment is not None:
            segment.record = number
            out.append(segment)
    return out


def night(segments, name: str, keys: KeyLog, saved=()):
    rows = defaultdict(list)
    decoder = CarryingDecoder(Settings(), [name], lambda table, row: rows[table.name].append(dict(row)), saved=saved,
                              keys=keys)
    for segment in segments:
        decoder.feed(segment, 0)
    return rows, decoder.finish(segments[-1].ts_ns, name), decoder


def told(rows) -> list[tuple]:
    """The frames a run left in the lake (what ending a carried connection made is provisional:
    the run that resumes it replaces it)."""
    return [(r["direction"], r["kind"], r["method"], r["stream_offset"], r["tls"]) for r in rows["frames"]
            if not r["provisional"]]


@pytest.fixture(scope="module", params=list(VERSIONS))
def capture(request, tmp_path_factory):
    found = tls_capture(tmp_path_factory.mktemp(request.param), request.param, FRAMES, max_record=5000,
                        **VERSIONS[request.param])
    return found, segments_of(found.path), read_key_logs([str(found.keylog)])


def test_a_tls_connection_cut_anywhere_resumes_in_the_next_run(capture):
    found, segments, keys = capture
    whole, _, _ = night(segments, "whole.pcap", keys)
    assert [r for r in whole["decode_issues"]] == [] and len(whole["frames"]) > 60
    for cut in (4, 5, 6, 7, 9, 12, 20, 40, len(segments) // 2, len(segments) - 8):
        first, states, _ = night(segments[:cut], "a.pcap", keys)
        assert len(states) == 1, cut
        second, _, resumed = night(segments[cut:], "b.pcap", keys, saved=states)
        assert [r.connection for r in resumed.resumed] == [states[0].connection]
        assert told(first) + told(second) == told(whole), cut
        # (what ending the carried connection made in the first run is provisional: the lake drops it
        # once the second run resumes the connection)
        assert second["decode_issues"] == [] and [r for r in first["decode_issues"] if not r["provisional"]] == [], cut
        (tls,) = second["tls_connections"]
        (once,) = whole["tls_connections"]
        ignored = {"source", "provisional", "run_id", "capture"}
        assert {k: v for k, v in tls.items() if k not in ignored} == {k: v for k, v in once.items() if k not in ignored}


def _secrets(keys: KeyLog) -> list[bytes]:
    """Every secret of the key log and every key derived from one (TLS 1.3's per suite, TLS 1.2's
    key block for no particular randoms is out of reach: its master secret is in the list)."""
    found = []
    for labels in keys.secrets.values():
        for secret in labels.values():
            found.append(secret)
            for suite in (0x1301, 0x1302, 0x1303):
                if suite_of(suite).hash == ("SHA384" if len(secret) == 48 else "SHA256"):
                    found += list(traffic_keys13(suite_of(suite), secret))
    return found


def test_the_saved_state_holds_no_secret_and_no_key(capture):
    found, segments, keys = capture
    text = found.keylog.read_text()
    for cut in (6, len(segments) // 2):
        _, (state,), decoder = night(segments[:cut], "a.pcap", keys)
        blob = zlib.decompress(state.blob)
        secrets = _secrets(keys)
        tls = decoder.decoder.tracker  # (the live connection's keys, which the state must not hold)
        for tcp in tls._unique():
            layer = tcp.sink.tls
            if layer.block is not None:
                secrets += [*layer.block.keys, *layer.block.mac_keys, *layer.block.ivs, layer.master]
            secrets += [d.secret for d in layer.dirs if d.secret]
        assert secrets
        for secret in secrets:
            if len(secret) >= 8:
                assert leaks(blob, secret, window=8) is None
        assert not any(line.split()[2].encode() in blob for line in text.splitlines() if line.strip())


def test_a_next_run_without_the_key_log_says_why_it_decrypts_nothing(capture):
    found, segments, keys = capture
    cut = len(segments) // 2
    _, states, _ = night(segments[:cut], "a.pcap", keys)
    second, _, resumed = night(segments[cut:], "b.pcap", KeyLog(), saved=states)
    assert resumed.resumed
    assert {r["capture"] for r in second["frames"]} <= {"a.pcap"}  # (only a carried message's, closed now)
    layer = [r for r in second["decode_issues"] if r["issue_kind"].startswith("tls-")]
    assert {r["issue_kind"] for r in layer} == {"tls-not-decoded"}
    assert all("carried from the previous run" in r["detail"] for r in layer)
    # what the decrypted stream held when the first run ended stops there
    assert {r["issue_kind"] for r in second["decode_issues"]} - {"tls-not-decoded"} <= {"truncated",
                                                                                           "content-incomplete"}
    (tls,) = second["tls_connections"]
    assert tls["decrypted"] is True  # (its first run's part was)



def test_a_run_without_the_key_log_between_two_with_it_loses_only_its_own_part(capture):
    """Night 2's key log lacks the connection's secrets (counted, not decrypted, its records'
    sequence numbers kept); night 3's has them: decryption resumes at its first record, what night 2
    held is a gap of the decrypted stream, and AMQP framing resynchronises after it."""
    found, segments, keys = capture
    whole, _, _ = night(segments, "whole.pcap", keys)
    cuts = (len(segments) // 3, 2 * len(segments) // 3)
    _, states, _ = night(segments[:cuts[0]], "a.pcap", keys)
    second, states, _ = night(segments[cuts[0]:cuts[1]], "b.pcap", KeyLog(), saved=states)
    assert {r["issue_kind"] for r in second["decode_issues"] if r["issue_kind"].startswith("tls-")} == {"tls-not-decoded"}
    third, _, resumed = night(segments[cuts[1]:], "c.pcap", keys, saved=states)
    assert resumed.resumed
    # (night 2's records counted are told once decryption resumes: one run of them, as in one capture)
    layer = [r for r in third["decode_issues"] if r["issue_kind"].startswith("tls-")]
    assert layer and all(r["issue_kind"] == "tls-not-decoded" and "carried" in r["detail"] for r in layer)
    assert "gap" in {r["issue_kind"] for r in third["decode_issues"]}
    for direction in ("C>S", "S>C"):  # each direction's methods from the resynchronisation on, to its close
        mine = [r[2] for r in told(third) if r[1] == "method" and r[0] == direction]
        assert len(mine) >= 2 and mine == [r[2] for r in told(whole) if r[1] == "method" and r[0] == direction][-len(mine):]
        assert mine[-1] in ("connection.close-ok", "connection.close")
    (tls,) = third["tls_connections"]
    for direction in ("c2s", "s2c"):  # every TCP byte in a record or an issue, over the three nights
        assert tls[f"{direction}_skipped_bytes"] == sum(
            r["bytes_skipped"] for rows in (second, third) for r in rows["decode_issues"] if not r["provisional"]
            and r["issue_kind"].startswith("tls-") and r["direction"] == ("C>S" if direction == "c2s" else "S>C"))
