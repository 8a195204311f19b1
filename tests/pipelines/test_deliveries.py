"""The deliveries table's settlement rules, on hand-built frames (chispa)."""

from __future__ import annotations

from chispa import assert_df_equality

from pipelines.analytics.deliveries import deliveries
from tests.pipelines.test_errors import frames

S, C = "S>C", "C>S"


def deliver(tag, redelivered=False, ctag="c1"):
    return {"method": "basic.deliver", "direction": S, "delivery_tag": tag, "consumer_tag": ctag,
            "redelivered": redelivered, "exchange": "", "routing_key": "q"}


def settle(method, tag, multiple=False, requeue=None):
    return {"method": method, "direction": C, "delivery_tag": tag, "multiple": multiple, "requeue": requeue}


def test_settlement_rules(spark):
    given = frames(spark, [
        {"method": "channel.open", "direction": C},
        {"method": "basic.consume", "direction": C, "queue": "q", "consumer_tag": "", "no_ack": False},
        {"method": "basic.consume-ok", "direction": S, "consumer_tag": "c1"},
        deliver(1), deliver(2), deliver(3),
        settle("basic.ack", 99),                           # a tag delivered before the capture: no row
        settle("basic.ack", 2, multiple=True),             # settles 1 and 2
        deliver(4), settle("basic.reject", 4, requeue=True),
        deliver(5, redelivered=True), settle("basic.nack", 5, multiple=False, requeue=False),
        deliver(6), deliver(7), settle("basic.ack", 0, multiple=True),  # tag 0: all outstanding (3, 6, 7)
        deliver(8),
        {"method": "channel.close", "direction": C, "reply_code": 200},  # 8 outstanding: requeued
        {"method": "channel.open", "direction": C},        # the number reused: tags start over
        {"method": "basic.get", "direction": C, "queue": "g", "no_ack": True},
        {"method": "basic.get-ok", "direction": S, "delivery_tag": 1, "exchange": "", "routing_key": "g"},
        deliver(1, ctag="unknown"),                        # its consumer started before the capture
    ])
    got = deliveries(given).select("channel_instance", "delivery_tag", "queue", "outcome", "requeue",
                                   "settled_by_multiple", "redelivered", "settle_latency_ms")
    expected = spark.createDataFrame([
        (1, 1, "q", "ack", None, True, False, 4e-6), (1, 2, "q", "ack", None, True, False, 3e-6),
        (1, 3, "q", "ack", None, True, False, 9e-6), (1, 4, "q", "reject", True, False, False, 1e-6),
        (1, 5, "q", "nack", False, False, True, 1e-6), (1, 6, "q", "ack", None, True, False, 2e-6),
        (1, 7, "q", "ack", None, True, False, 1e-6), (1, 8, "q", "channel-closed", None, False, False, 1e-6),
        (2, 1, "g", "auto-ack", None, False, None, None), (2, 1, None, "unsettled", None, False, False, None),
    ], "channel_instance int, delivery_tag bigint, queue string, outcome string, requeue boolean, "
       "settled_by_multiple boolean, redelivered boolean, settle_latency_ms double")
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True)


def test_connection_close_settles_what_is_left(spark):
    given = frames(spark, [
        {"method": "basic.consume", "direction": C, "queue": "q", "consumer_tag": "t", "no_ack": False,
         "no_wait": True},
        deliver(1, ctag="t"),
        {"method": "connection.close", "direction": C, "channel": 0, "reply_code": 200},
    ])
    row = deliveries(given).collect()[0]
    assert (row.outcome, row.queue, row.settle_latency_ms) == ("connection-closed", "q", 1e-6)
