"""`amqpcap decode`: the JSON Lines contract, the readable view, and failures that lose nothing."""

from __future__ import annotations

import base64
import json

import pytest

from amqpcap.cli import main
from tests.helpers.samples import SAMPLES

KINDS = {"protocol-header", "method", "header", "body", "heartbeat", "issue"}
END_KEYS = {"end_reason": str, "tcp_end": str, "status": str, "first_ts_ns": int, "last_ts_ns": int,
            "duration_s": float, "directions": dict, "syn_seen": bool}
COMMON = {"ts": float, "connection": str, "client": str, "server": str, "dir": str, "kind": str}


def run(capfdbinary, *argv):
    code = main(["decode", *map(str, argv)])
    out, err = capfdbinary.readouterr()
    return code, out.decode(), err.decode()


def test_jsonl_contract(capfdbinary):
    # (the crafted captures replay one connection, same addresses and times: decoded together
    # they would merge into one stream, so they are decoded apart)
    objects = []
    for inputs in [(SAMPLES,), *[(p,) for p in sorted((SAMPLES / "crafted").glob("*.pcap*"))]]:
        code, out, _ = run(capfdbinary, "--jsonl", *inputs)
        assert code == 0
        objects += [json.loads(line) for line in out.splitlines()]
    assert len(objects) > 2000
    for obj in objects:
        if obj["kind"] == "issue" and obj.get("file_offset") is not None:  # damage to the file itself
            assert obj["connection"] is obj["dir"] is obj["client"] is None and isinstance(obj["capture"], str)
            assert obj["file_end_offset"] >= obj["file_offset"] and isinstance(obj["bytes_skipped"], int)
            continue
        if obj["kind"] == "connection-end":  # how the connection ended: not a frame, no direction
            assert obj["dir"] is obj["channel"] is obj["offset"] is None and isinstance(obj["connection"], str)
            for key, kind in END_KEYS.items():
                assert isinstance(obj[key], kind), (key, obj)
            assert obj["end_reason"] in ("close", "heartbeat-timeout", "fin", "rst", "port-reuse", "capture-end")
            assert obj["close"] is None or isinstance(obj["close"]["reply_code"], int)
            continue
        for key, kind in COMMON.items():
            assert isinstance(obj[key], kind), (key, obj)
        assert obj["kind"] in KINDS and obj["dir"] in ("C>S", "S>C")
        assert obj["channel"] is None or isinstance(obj["channel"], int)
        if obj["kind"] == "method":
            assert "." in obj["method"] and isinstance(obj["args"], dict)
        elif obj["kind"] == "header":
            assert isinstance(obj["class"], str) and isinstance(obj["body_size"], int)
            assert isinstance(obj["properties"], dict)
        elif obj["kind"] == "issue":
            assert isinstance(obj["issue_kind"], str) and isinstance(obj["detail"], str)
            assert isinstance(obj["bytes_skipped"], int)
    acks = [o for o in objects if o["kind"] == "method" and o["method"] == "basic.ack"]
    assert all(set(o["args"]) == {"delivery_tag", "multiple"} for o in acks)
    closes = [o for o in objects if o.get("method") == "channel.close"]
    assert {"reply_code", "reply_text", "class_id", "method_id"} <= set(closes[0]["args"])


def test_readable_view_and_summary(capfdbinary):
    code, out, err = run(capfdbinary, SAMPLES / "returns_nack_reject.pcap")
    assert code == 0
    lines = out.splitlines()
    assert any("basic.return reply_code=312" in line for line in lines)
    assert any("protocol header AMQP 0 0 9 1 (0-9-1)" in line for line in lines)
    assert "1 captures read, 0 failed" in err


def test_missing_and_unreadable_files_fail_clearly_but_lose_nothing(capfdbinary, tmp_path):
    junk = tmp_path / "notes.pcap"
    junk.write_text("this is not a capture\n" * 10)
    code, out, err = run(capfdbinary, "--jsonl", tmp_path / "missing.pcap", junk, SAMPLES / "heartbeats.pcap")
    assert code == 1
    assert f"{tmp_path / 'missing.pcap'}: no such file" in err
    assert f"{junk}: not a pcap or pcapng capture" in err
    assert sum(json.loads(line)["kind"] == "heartbeat" for line in out.splitlines()) >= 4


def test_no_captures_at_all(capfdbinary, tmp_path):
    code, _, err = run(capfdbinary, tmp_path)
    assert code == 2 and "no capture files" in err


def test_bodies_only_when_asked_and_capped(capfdbinary):
    _, out, _ = run(capfdbinary, "--jsonl", SAMPLES / "large_and_pipelined.pcap")
    assert "body_b64" not in out
    _, out, _ = run(capfdbinary, "--jsonl", "--bodies", "--body-cap", "100", SAMPLES / "large_and_pipelined.pcap")
    messages = [json.loads(line)["message"] for line in out.splitlines() if '"message"' in line]
    big = [m for m in messages if m["body_size"] == 300_000]
    assert big and all(len(base64.b64decode(m["body_b64"])) == 100 and m["body_truncated"] for m in big)


def test_bad_spec_option(capfdbinary):
    code, _, err = run(capfdbinary, "--spec", "nonsense", SAMPLES / "heartbeats.pcap")
    assert code == 2 and "VERSION=FILE" in err


def test_help_lists_decode():
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0


def test_damage_to_the_file_in_both_views(capfdbinary, tmp_path):
    """A flipped length bit in a record header: one issue record with the file offsets, one line in
    the readable view, one warning on stderr; the rest of the file still decodes."""
    import struct
    data = bytearray((SAMPLES / "heartbeats.pcap").read_bytes())
    pos = 24
    for _ in range(3):
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    data[pos + 10] ^= 0x40  # record 3's caplen
    damaged = tmp_path / "damaged.pcap"
    damaged.write_bytes(bytes(data))
    code, out, err = run(capfdbinary, "--jsonl", damaged)
    assert code == 0
    issues = [json.loads(line) for line in out.splitlines() if '"file_offset"' in line]
    assert [(i["issue_kind"], i["file_offset"]) for i in issues] == [("damaged-record-header", pos)]
    assert f"{damaged}: damaged: " in err and err.count("damaged:") == 1
    assert sum(1 for line in out.splitlines() if '"kind":"heartbeat"' in line) >= 6
    code, out, _ = run(capfdbinary, damaged)
    assert code == 0 and f"capture {damaged} at byte {pos}: ISSUE damaged-record-header" in out


def test_findings_view_lists_what_needs_attention_by_severity(capfdbinary):
    code, out, _ = run(capfdbinary, "--findings", SAMPLES / "consumer_ack_timeout.pcap", SAMPLES / "php_short_lived.pcap")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "findings: 1 error, 2 warning (32 with those on several connections)"
    assert lines[1].startswith("  error   consumer-ack-timeout: consumer ctag1.")
    assert "connection-churn: AMQPLib" in out and "(on 30 connections)" in out  # (one line for 30 declares)
    code, out, _ = run(capfdbinary, "--findings", "--json", SAMPLES / "unroutable_mandatory.pcap")
    listed = json.loads(out)
    assert code == 0 and sorted(f["routing_key"] for f in listed if f["kind"] == "unroutable") == [
        "nowhere.0", "nowhere.1", "nowhere.2"]
    code, out, _ = run(capfdbinary, "--stats", SAMPLES / "unroutable_mandatory.pcap")
    assert code == 0 and out.startswith("findings: 3 warning")
    assert run(capfdbinary, "--findings", "--jsonl", SAMPLES / "unroutable_mandatory.pcap")[0] == 2
