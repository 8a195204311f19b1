"""message_flows matching on hand-built messages: fan-out, bursts, redelivery, what stays alone."""

from __future__ import annotations

import datetime

from pipelines.analytics.message_flows import message_flows
from pipelines.schemas import DELIVERIES, MESSAGES


def messages(spark, rows):
    base = dict.fromkeys(MESSAGES.names)
    full = []
    for i, (method, connection, channel, body, fields) in enumerate(rows):
        row = {**base, "date": datetime.date(2026, 11, 21), "capture": "x.pcap", "connection": connection,
               "channel": channel, "method": method, "ts_ns": (i + 1) * 1_000_000, "stream_offset": i,
               "exchange": "ex", "routing_key": "rk", "body_sha256": body, "redelivered": False, **fields}
        full.append(tuple(row[name] for name in MESSAGES.names))
    return spark.createDataFrame(full, MESSAGES.spark())


def test_matching(spark):
    given = messages(spark, [
        ("basic.publish", "pub", 1, "A", {}),
        ("basic.deliver", "c1", 1, "A", {"consumer_tag": "t1", "delivery_tag": 1}),  # fan-out: queue 1
        ("basic.deliver", "c2", 1, "A", {"consumer_tag": "t2", "delivery_tag": 1}),  # ... and queue 2
        ("basic.publish", "pub", 1, "B", {}), ("basic.publish", "pub", 1, "B", {}),  # a burst of twins
        ("basic.deliver", "c1", 1, "B", {"consumer_tag": "t1", "delivery_tag": 2}),
        ("basic.deliver", "c1", 1, "B", {"consumer_tag": "t1", "delivery_tag": 3}),
        ("basic.deliver", "c1", 1, "B", {"consumer_tag": "t1", "delivery_tag": 4, "redelivered": True}),
        ("basic.publish", "pub", 1, "C", {"message_id": "m-9"}),                    # never delivered
        ("basic.deliver", "c1", 1, "Z", {"consumer_tag": "t1", "delivery_tag": 5}),  # published before
    ])
    got = message_flows(given, spark.createDataFrame([], DELIVERIES.spark())).collect()
    pairs = sorted((r.body_sha256, r.match, r.publisher_connection, r.consumer_connection, r.delivery_tag,
                    r.publish_to_deliver_ms) for r in got)
    assert pairs == [
        ("A", "body", "pub", "c1", 1, 1.0), ("A", "body", "pub", "c2", 1, 2.0),
        ("B", "body", "pub", "c1", 2, 2.0), ("B", "body", "pub", "c1", 3, 2.0),
        ("B", "body", "pub", "c1", 4, 3.0),  # the redelivery: the copy its stream got last
        ("C", None, "pub", None, None, None), ("Z", None, None, "c1", 5, None),
    ]
