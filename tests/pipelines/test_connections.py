"""The connections table's handshake timings and end reasons, on hand-built rows."""

from __future__ import annotations

import datetime

from pipelines.analytics import reference
from pipelines.analytics.connections import connections
from pipelines.schemas import STREAMS
from tests.pipelines.test_errors import frames

UTC = datetime.timezone.utc


def streams(spark, rows):
    base = dict.fromkeys(STREAMS.names)
    full = []
    for connection, end_reason, last_second in rows:
        row = {**base, "date": datetime.date(2026, 11, 21), "connection": connection, "capture": "x.pcap",
               "status": "amqp", "syn_seen": True, "end_reason": end_reason,
               "first_ts": datetime.datetime(2026, 11, 21, tzinfo=UTC),
               "last_ts": datetime.datetime(2026, 11, 21, 0, 0, last_second, tzinfo=UTC)}
        full.append(tuple(row[name] for name in STREAMS.names))
    return spark.createDataFrame(full, STREAMS.spark())


def at(second, **fields):
    return {"ts": datetime.datetime(2026, 11, 21, 0, 0, 0, second * 1000, tzinfo=UTC), "channel": 0, **fields}


def test_handshake_and_end_reasons(spark):
    handshake = [
        at(0, kind="protocol-header", direction="C>S", method=None),
        at(1, method="connection.start", direction="S>C", args_json='{"server_properties": {"product": "RabbitMQ"}}'),
        at(2, method="connection.start-ok", direction="C>S",
           args_json='{"mechanism": "PLAIN", "auth_user": "bob", "response": "<redacted>"}'),
        at(5, method="connection.tune", direction="S>C", args_json='{"heartbeat": 60}'),
        at(6, method="connection.tune-ok", direction="C>S", args_json='{"heartbeat": 1}'),
        at(7, method="connection.open", direction="C>S", args_json='{"virtual_host": "/v"}'),
        at(9, method="connection.open-ok", direction="S>C"),
    ]
    rows = [dict(r, connection=c) for c in ("closed", "silent", "cut") for r in handshake]
    rows += [at(10, method="connection.close", direction="C>S", reply_code=200, connection="closed",
                failing_class_id=0, failing_method_id=0),
             at(11, method="connection.close-ok", direction="S>C", connection="closed")]
    got = {r.connection: r for r in connections(
        streams(spark, [("closed", "fin", 1), ("silent", "rst", 5), ("cut", "rst", 0)]),
        frames(spark, rows), reference.method_names(spark)).collect()}
    assert got["closed"].end_reason == "close" and got["closed"].close_initiator == "client"
    assert got["silent"].end_reason == "heartbeat-timeout"  # 1 s heartbeat, 5 s without client traffic
    assert got["cut"].end_reason == "rst"
    row = got["closed"]
    assert (row.handshake_ms, row.auth_ms) == (9.0, 4.0)
    assert (row.server_product, row.auth_mechanism, row.auth_user, row.vhost) == ("RabbitMQ", "PLAIN", "bob", "/v")
    assert (row.heartbeat_proposed, row.heartbeat) == (60, 1)
