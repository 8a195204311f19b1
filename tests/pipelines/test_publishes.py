"""The publishes table's confirm, return and transaction rules, on hand-built frames (chispa)."""

from __future__ import annotations

from chispa import assert_df_equality

from pipelines.analytics.publishes import publishes
from pipelines.schemas import MESSAGES
from tests.pipelines.test_errors import frames

S, C = "S>C", "C>S"


def pub(routing_key, mandatory=False):
    return {"method": "basic.publish", "direction": C, "exchange": "x", "routing_key": routing_key,
            "mandatory": mandatory, "stream_offset": hash(routing_key) % 10_000}


def no_messages(spark):
    return spark.createDataFrame([], MESSAGES.spark())


def test_confirms_returns_and_transactions(spark):
    given = frames(spark, [
        {"method": "channel.open", "direction": C},
        pub("before-select"),
        {"method": "confirm.select", "direction": C},
        pub("a"), pub("b"), pub("c", mandatory=True), pub("d"),
        {"method": "basic.return", "direction": S, "exchange": "x", "routing_key": "c", "reply_code": 312,
         "reply_text": "NO_ROUTE"},
        {"method": "basic.ack", "direction": S, "delivery_tag": 3, "multiple": True},   # a, b, c
        {"method": "basic.nack", "direction": S, "delivery_tag": 4, "multiple": False},  # d
        pub("e"),                                                                          # never confirmed
        {"method": "channel.close", "direction": C, "reply_code": 200},
        {"method": "channel.open", "direction": C},                                        # number reused
        {"method": "tx.select", "direction": C},
        pub("t1"), {"method": "tx.rollback", "direction": C}, pub("t2"), {"method": "tx.commit", "direction": C},
        pub("t3"),
    ])
    got = publishes(given, no_messages(spark)).select(
        "channel_instance", "routing_key", "confirm_seq", "confirm_outcome", "confirm_latency_ms",
        "confirmed_by_multiple", "returned", "return_code", "tx_outcome")
    expected = spark.createDataFrame([
        (1, "before-select", None, None, None, None, False, None, None),
        (1, "a", 1, "ack", 5e-6, True, False, None, None), (1, "b", 2, "ack", 4e-6, True, False, None, None),
        (1, "c", 3, "ack", 3e-6, True, True, 312, None), (1, "d", 4, "nack", 3e-6, False, False, None, None),
        (1, "e", 5, "unconfirmed", None, None, False, None, None),
        (2, "t1", None, None, None, None, False, None, "rolled-back"),
        (2, "t2", None, None, None, None, False, None, "committed"),
        (2, "t3", None, None, None, None, False, None, "uncommitted"),
    ], "channel_instance int, routing_key string, confirm_seq bigint, confirm_outcome string, "
       "confirm_latency_ms double, confirmed_by_multiple boolean, returned boolean, return_code int, "
       "tx_outcome string")
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True)
