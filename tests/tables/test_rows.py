"""Decoder records to table rows: every record lands in exactly one table, typed columns agree
with the arguments, and Arrow batches carry the declared schemas."""

from __future__ import annotations

import json

import pytest

from amqpcap.connection.record import from_dict
from amqpcap.lake.tablefiles import rows_to_batch
from amqpcap.tables.registry import DECODE_ISSUES, FRAMES, MESSAGES
from amqpcap.tables.rows import RawRows
from tests.helpers.samples import EXPECTED, decoded

RECORDED = [p for p in EXPECTED if p.parent.name != "crafted"]


def batches(records, batch_rows=50):
    builder = RawRows("run-1")
    rows = {"frames": [], "messages": [], "decode_issues": []}
    for record in records:
        if record["kind"] == "issue":
            rows["decode_issues"].append(builder.issue_row(record))
        else:
            rows["frames"].append(builder.frame_row(record))
            if "message" in record:
                rows["messages"].append(builder.message_row(record))
    tables = {t.name: t for t in (FRAMES, MESSAGES, DECODE_ISSUES)}
    return {name: [rows_to_batch(tables[name], part[i:i + batch_rows]) for i in range(0, len(part), batch_rows)]
            for name, part in rows.items()}


@pytest.mark.parametrize("expected_path", EXPECTED, ids=[p.name.split(".")[0] for p in EXPECTED])
def test_every_record_lands_once_with_the_declared_schema(expected_path):
    _, records, _ = decoded(expected_path)
    out = batches(records)
    counts = {name: sum(b.num_rows for b in bs) for name, bs in out.items()}
    assert counts["frames"] == sum(r["kind"] != "issue" for r in records)
    assert counts["decode_issues"] == sum(r["kind"] == "issue" for r in records)
    assert counts["messages"] == sum("message" in r for r in records)
    for table in (FRAMES, MESSAGES, DECODE_ISSUES):
        assert all(b.schema.equals(table.arrow(), check_metadata=True) for b in out[table.name])
        assert all(b.num_rows <= 50 for b in out[table.name])


def _rows(name, sample):
    path = next(p for p in EXPECTED if p.name == f"{sample}.expected.json")
    out = batches(decoded(path)[1])
    return [row for batch in out[name] for row in batch.to_pylist()]


def test_typed_columns_follow_the_arguments():
    frames = _rows("frames", "returns_nack_reject")
    returned = [f for f in frames if f["method"] == "basic.return"]
    assert [(f["reply_code"], f["reply_text"], f["direction"]) for f in returned] == [(312, "NO_ROUTE", "S>C")]
    acks = [f for f in frames if f["method"] == "basic.ack"]
    assert all(f["delivery_tag"] == json.loads(f["args_json"])["delivery_tag"] for f in acks)
    assert acks and all(f["multiple"] == json.loads(f["args_json"])["multiple"] for f in acks)
    closes = [f for f in frames if f["method"] == "connection.close"]
    assert all(f["failing_class_id"] == 0 and f["class_id"] == 10 for f in closes)
    assert all(f["date"].isoformat() == f["ts"].date().isoformat() for f in frames)
    assert [f["connection_seq"] for f in frames] == [None] * len(frames)  # assigned by the Tabulator


def test_message_rows_carry_properties_and_headers():
    messages = _rows("messages", "rich_properties")
    full = next(m for m in messages if m["method"] == "basic.publish" and m["headers"]
                and len(m["headers"]) > 10)
    headers = dict(full["headers"])
    assert json.loads(full["headers_json"]).keys() == headers.keys()
    assert full["user_id"] == "amqpcap" and full["complete"] and len(full["body_sha256"]) == 64
    assert full["body"] is None  # bodies are not kept unless configured


def test_unsigned_values_beyond_bigint_become_null():
    record = {"kind": "method", "ts_ns": 10**18, "ts_last_ns": 10**18, "capture": "x", "connection": "c",
              "client": "a", "server": "b", "dir": "C>S", "channel": 1, "offset": 0, "size": 21,
              "method": "basic.ack", "class_id": 60, "method_id": 80,
              "args": {"delivery_tag": 2**64 - 1, "multiple": False}}
    row = RawRows("r").frame_row(from_dict(record))
    assert row["delivery_tag"] is None and json.loads(row["args_json"])["delivery_tag"] == 2**64 - 1
    assert rows_to_batch(FRAMES, [row]).num_rows == 1


def test_rows_dates_are_their_times_days_when_the_day_changes_back_and_forth():
    """A row's date is its day in UTC, also right after rows of another day (the last day asked
    for is remembered)."""
    import datetime

    from amqpcap.tables.rows import _date
    day = 86_400_000_000_000
    times = [0, day - 1, day, 5 * day + 3, day, day - 1, -1, 20_000 * day, 20_000 * day + day - 1, 0]
    assert [_date(ts) for ts in times] == [datetime.date(1970, 1, 1) + datetime.timedelta(days=ts // day)
                                          for ts in times]
