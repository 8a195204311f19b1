"""rpc_calls pairing on hand-built frames (chispa): pipelining, several channels, errors, no-wait."""

from __future__ import annotations

from chispa import assert_df_equality

from pipelines.analytics.rpc_calls import rpc_calls
from tests.pipelines.test_errors import frames

S, C = "S>C", "C>S"


def m(method, direction, channel=1, **fields):
    return {"method": method, "direction": direction, "channel": channel, **fields}


def test_pairing(spark):
    given = frames(spark, [
        m("queue.declare", C), m("queue.declare", C), m("exchange.declare", C, channel=2),  # pipelined
        m("queue.declare-ok", S), m("exchange.declare-ok", S, channel=2), m("queue.declare-ok", S),
        m("queue.bind", C, no_wait=True),                                   # expects nothing
        m("basic.get", C), m("basic.get-empty", S),
        m("basic.cancel", S, consumer_tag="c"),                             # a broker notification
        m("queue.delete", C), m("channel.close", S, reply_code=404, reply_text="NOT_FOUND"),
        m("channel.close-ok", C),
        m("basic.qos", C, channel=2),
    ])
    got = rpc_calls(given).select("channel", "requester", "request", "reply", "latency_ms", "outcome",
                                  "error_code")
    expected = spark.createDataFrame([
        (1, "client", "queue.declare", "queue.declare-ok", 3e-6, "ok", None),
        (1, "client", "queue.declare", "queue.declare-ok", 4e-6, "ok", None),
        (2, "client", "exchange.declare", "exchange.declare-ok", 2e-6, "ok", None),
        (1, "client", "basic.get", "basic.get-empty", 1e-6, "ok", None),
        (1, "client", "queue.delete", "channel.close", 1e-6, "error", 404),
        (1, "server", "channel.close", "channel.close-ok", 1e-6, "ok", None),
        (2, "client", "basic.qos", None, None, "no-reply", None),
    ], "channel int, requester string, request string, reply string, latency_ms double, outcome string, "
       "error_code int")
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True)


def test_a_connection_error_answers_what_is_pending(spark):
    given = frames(spark, [m("connection.open", C, channel=0), m("channel.open", C, channel=3),
                           m("connection.close", S, channel=0, reply_code=530, reply_text="NOT_ALLOWED")])
    got = {r.request: (r.outcome, r.error_code) for r in rpc_calls(given).collect()}
    assert got == {"connection.open": ("error", 530), "channel.open": ("error", 530),
                   "connection.close": ("no-reply", None)}
