"""The errors table: a chispa test on hand-built frames, and the samples' known reply codes."""

from __future__ import annotations

import datetime

from chispa import assert_df_equality

from pipelines.analytics import reference
from pipelines.analytics.errors import errors
from pipelines.schemas import ERRORS, FRAMES


def frames(spark, rows):
    """FRAMES rows from a few fields each; everything else null."""
    base = dict.fromkeys(FRAMES.names)
    day = datetime.date(2026, 11, 21)
    full = []
    for i, fields in enumerate(rows):
        row = {**base, "date": day, "connection": "c1", "capture": "x.pcap", "ts_ns": i,
               "ts": datetime.datetime(2026, 11, 21, tzinfo=datetime.timezone.utc), "client": "a",
               "server": "b", "kind": "method", "channel": 1, **fields}
        full.append(tuple(row[name] for name in FRAMES.names))
    return spark.createDataFrame(full, FRAMES.spark())


def test_errors_picks_and_names_what_went_wrong(spark):
    given = frames(spark, [
        {"method": "channel.close", "direction": "C>S", "reply_code": 200, "reply_text": "bye"},
        {"method": "channel.close", "direction": "C>S", "reply_code": 0, "reply_text": ""},
        {"method": "channel.close", "direction": "S>C", "reply_code": 404, "reply_text": "NOT_FOUND - no queue",
         "failing_class_id": 50, "failing_method_id": 10},
        {"method": "connection.close", "direction": "S>C", "reply_code": 320, "reply_text": "forced",
         "failing_class_id": 0, "failing_method_id": 0, "channel": 0},
        {"method": "basic.return", "direction": "S>C", "reply_code": 312, "reply_text": "NO_ROUTE"},
        {"method": "basic.nack", "direction": "C>S", "delivery_tag": 4, "multiple": False},
        {"method": "basic.nack", "direction": "S>C", "delivery_tag": 9, "multiple": True},
        {"method": "basic.ack", "direction": "S>C", "delivery_tag": 8, "multiple": False},
    ])
    got = errors(given, reference.reply_codes(spark), reference.method_names(spark)).select(
        "ts_ns", "method", "initiator", "scope", "reply_code", "reply_name", "code_class", "failing_method",
        "delivery_tag", "multiple")
    expected = spark.createDataFrame([
        (2, "channel.close", "server", "channel", 404, "NOT_FOUND", "soft-error", "queue.declare", None, None),
        (3, "connection.close", "server", "connection", 320, "CONNECTION_FORCED", "hard-error", None, None, None),
        (4, "basic.return", "server", "channel", 312, "NO_ROUTE", "soft-error", None, None, None),
        (6, "basic.nack", "server", "channel", None, None, None, None, 9, True),
    ], "ts_ns bigint, method string, initiator string, scope string, reply_code int, reply_name string, "
       "code_class string, failing_method string, delivery_tag bigint, multiple boolean")
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True)


def test_errors_schema_is_the_declared_one(spark):
    built = errors(frames(spark, []), reference.reply_codes(spark), reference.method_names(spark))
    assert built.columns == ERRORS.names
