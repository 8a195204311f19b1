"""The analytics rules on hand-built frames, without Spark: settlement, confirms, returns,
transactions, RPC pairing, errors, lifetimes, flow, handshake and heartbeats."""

from __future__ import annotations

import json

from amqpcap.settings import AnalyticsSection
from tests.helpers.builders import C, S, analyse, stream


def pick(rows, *names):
    return sorted((tuple(r[n] for n in names) for r in rows), key=str)


def deliver(tag, redelivered=False, ctag="c1"):
    return {"method": "basic.deliver", "direction": S, "delivery_tag": tag, "consumer_tag": ctag,
            "redelivered": redelivered, "exchange": "", "routing_key": "q"}


def settle(method, tag, multiple=False, requeue=None):
    return {"method": method, "direction": C, "delivery_tag": tag, "multiple": multiple, "requeue": requeue}


def test_settlement_rules():
    out = analyse([
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
    assert pick(out["deliveries"], "channel_instance", "delivery_tag", "queue", "outcome", "requeue",
                "settled_by_multiple", "redelivered", "settle_latency_ms") == sorted([
        (1, 1, "q", "ack", None, True, False, 4e-6), (1, 2, "q", "ack", None, True, False, 3e-6),
        (1, 3, "q", "ack", None, True, False, 9e-6), (1, 4, "q", "reject", True, False, False, 1e-6),
        (1, 5, "q", "nack", False, False, True, 1e-6), (1, 6, "q", "ack", None, True, False, 2e-6),
        (1, 7, "q", "ack", None, True, False, 1e-6), (1, 8, "q", "channel-closed", None, False, False, 1e-6),
        (2, 1, "g", "auto-ack", None, False, None, None), (2, 1, None, "unsettled", None, False, False, None),
    ], key=str)


def test_a_connection_close_or_its_tcp_end_settles_what_is_left():
    out = analyse([
        {"method": "basic.consume", "direction": C, "queue": "q", "consumer_tag": "t", "no_ack": False,
         "no_wait": True},
        deliver(1, ctag="t"),
        {"method": "connection.close", "direction": C, "channel": 0, "reply_code": 200},
    ])
    (row,) = out["deliveries"]
    assert (row["outcome"], row["queue"], row["settle_latency_ms"], row["settled_ns"]) == ("connection-closed", "q", 1e-6, 2)
    # killed without a close method: the FIN or RST ends it, at the connection's last packet
    out = analyse([{"method": "basic.get", "direction": C, "queue": "q"}, deliver(1) | {"method": "basic.get-ok"}],
                  streams=[stream(end_reason="fin", last_ts=5)])
    assert pick(out["deliveries"], "outcome", "settled_at") == [("connection-closed", 5)]
    out = analyse([{"method": "basic.get", "direction": C, "queue": "q"}, deliver(1) | {"method": "basic.get-ok"}],
                  streams=[stream(end_reason="capture-end", last_ts=5)])
    assert pick(out["deliveries"], "outcome", "settled_at") == [("unsettled", None)]


def test_a_delivery_carries_its_message_facts():
    out = analyse([deliver(1), settle("basic.ack", 1)],
                  messages={0: {"message_id": "m-1", "correlation_id": "r-1", "app_id": "app", "body_size": 3,
                                "body_sha256": "ab" * 32}})
    (row,) = out["deliveries"]
    assert (row["message_id"], row["correlation_id"], row["app_id"], row["body_size"]) == ("m-1", "r-1", "app", 3)


def pub(routing_key, mandatory=False, **fields):
    return {"method": "basic.publish", "direction": C, "exchange": "x", "routing_key": routing_key,
            "mandatory": mandatory, **fields}


def test_confirms_returns_and_transactions():
    out = analyse([
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
    assert pick(out["publishes"], "channel_instance", "routing_key", "confirm_seq", "confirm_outcome",
                "confirm_latency_ms", "confirmed_by_multiple", "returned", "return_code", "tx_outcome") == sorted([
        (1, "before-select", None, None, None, None, False, None, None),
        (1, "a", 1, "ack", 5e-6, True, False, None, None), (1, "b", 2, "ack", 4e-6, True, False, None, None),
        (1, "c", 3, "ack", 3e-6, True, True, 312, None), (1, "d", 4, "nack", 3e-6, False, False, None, None),
        (1, "e", 5, "unconfirmed", None, None, False, None, None),
        (2, "t1", None, None, None, None, False, None, "rolled-back"),
        (2, "t2", None, None, None, None, False, None, "committed"),
        (2, "t3", None, None, None, None, False, None, "uncommitted"),
    ], key=str)


def test_a_publish_is_emitted_as_soon_as_it_is_final():
    emitted = []
    rows = [{"method": "confirm.select", "direction": C}, pub("a"), pub("b", mandatory=True),
            {"method": "basic.ack", "direction": S, "delivery_tag": 1}, pub("c")]
    from amqpcap.rules import Analytics
    from tests.helpers.builders import frame
    analytics = Analytics(lambda table, row: emitted.append((table.name, row["routing_key"])), AnalyticsSection())
    for i, fields in enumerate(rows):
        analytics.frame(frame(i, fields))
    assert emitted == [("publishes", "a")]  # b awaits its confirm, c too
    # not in confirm mode: a mandatory publish waits for a possible return, bounded by count and time
    out = analyse([pub("m1", mandatory=True), pub("m2", mandatory=True), pub("m3", mandatory=True),
                   {"method": "basic.return", "direction": S, "exchange": "x", "routing_key": "m1",
                    "reply_code": 312}],
                  settings=AnalyticsSection(return_window=1))
    assert pick(out["publishes"], "routing_key", "returned") == [("m1", False), ("m2", False), ("m3", False)]


def m(method, direction, channel=1, **fields):
    return {"method": method, "direction": direction, "channel": channel, **fields}


def test_rpc_pairing():
    out = analyse([
        m("queue.declare", C), m("queue.declare", C), m("exchange.declare", C, channel=2),  # pipelined
        m("queue.declare-ok", S), m("exchange.declare-ok", S, channel=2), m("queue.declare-ok", S),
        m("queue.bind", C, no_wait=True),                                   # expects nothing
        m("basic.get", C), m("basic.get-empty", S),
        m("basic.cancel", S, consumer_tag="c"),                             # a broker notification
        m("queue.delete", C), m("channel.close", S, reply_code=404, reply_text="NOT_FOUND"),
        m("channel.close-ok", C),
        m("basic.qos", C, channel=2),
    ])
    assert pick(out["rpc_calls"], "channel", "requester", "request", "reply", "latency_ms", "outcome",
                "error_code") == sorted([
        (1, "client", "queue.declare", "queue.declare-ok", 3e-6, "ok", None),
        (1, "client", "queue.declare", "queue.declare-ok", 4e-6, "ok", None),
        (2, "client", "exchange.declare", "exchange.declare-ok", 2e-6, "ok", None),
        (1, "client", "basic.get", "basic.get-empty", 1e-6, "ok", None),
        (1, "client", "queue.delete", "channel.close", 1e-6, "error", 404),
        (1, "server", "channel.close", "channel.close-ok", 1e-6, "ok", None),
        (2, "client", "basic.qos", None, None, "no-reply", None),
    ], key=str)


def test_a_connection_error_answers_what_is_pending():
    out = analyse([m("connection.open", C, channel=0), m("channel.open", C, channel=3),
                   m("connection.close", S, channel=0, reply_code=530, reply_text="NOT_ALLOWED")])
    assert {r["request"]: (r["outcome"], r["error_code"]) for r in out["rpc_calls"]} == {
        "connection.open": ("error", 530), "channel.open": ("error", 530), "connection.close": ("no-reply", None)}


def test_errors_picks_and_names_what_went_wrong():
    out = analyse([
        {"method": "channel.close", "direction": C, "reply_code": 200, "reply_text": "bye"},
        {"method": "channel.close", "direction": C, "reply_code": 0, "reply_text": ""},
        {"method": "channel.close", "direction": S, "reply_code": 404, "reply_text": "NOT_FOUND - no queue",
         "failing_class_id": 50, "failing_method_id": 10},
        {"method": "connection.close", "direction": S, "reply_code": 320, "reply_text": "forced",
         "failing_class_id": 0, "failing_method_id": 0, "channel": 0},
        {"method": "basic.return", "direction": S, "reply_code": 312, "reply_text": "NO_ROUTE"},
        {"method": "basic.nack", "direction": C, "delivery_tag": 4, "multiple": False},
        {"method": "basic.nack", "direction": S, "delivery_tag": 9, "multiple": True},
        {"method": "basic.ack", "direction": S, "delivery_tag": 8, "multiple": False},
    ])
    assert pick(out["errors"], "ts_ns", "method", "initiator", "scope", "reply_code", "reply_name", "code_class",
                "failing_method", "delivery_tag", "multiple") == [
        (2, "channel.close", "server", "channel", 404, "NOT_FOUND", "soft-error", "queue.declare", None, None),
        (3, "connection.close", "server", "connection", 320, "CONNECTION_FORCED", "hard-error", None, None, None),
        (4, "basic.return", "server", "channel", 312, "NO_ROUTE", "soft-error", None, None, None),
        (6, "basic.nack", "server", "channel", None, None, None, None, 9, True),
    ]


def test_channel_lifetimes_consumers_and_counts():
    out = analyse([
        {"method": "basic.publish", "direction": C},                  # opened before the capture
        {"method": "channel.close", "direction": S, "reply_code": 404, "reply_text": "NOT_FOUND"},
        {"method": "channel.close-ok", "direction": C},
        {"method": "channel.open", "direction": C},                   # the number reused
        {"method": "basic.qos", "direction": C, "args_json": '{"prefetch_count": 5, "global": true}'},
        {"method": "basic.consume", "direction": C, "queue": "q", "consumer_tag": "", "no_ack": False},
        {"method": "basic.consume-ok", "direction": S, "consumer_tag": "ct"},
        {"method": "basic.deliver", "direction": S}, {"method": "basic.ack", "direction": C},
        {"method": "basic.cancel", "direction": S, "consumer_tag": "ct"},  # queue deleted under it
    ])
    first, second = sorted(out["channels"], key=lambda r: r["channel_instance"])
    assert (first["channel_instance"], first["opened_at"], first["close_code"], first["close_initiator"],
            first["publishes"]) == (0, None, 404, "server", 1)
    assert (second["channel_instance"], second["prefetch_count"], second["prefetch_scope"], second["deliveries"],
            second["acks"], second["closed_at"]) == (1, 5, "per-channel", 1, 1, None)
    (consumer,) = json.loads(second["consumers_json"])
    assert (consumer["tag"], consumer["queue"], consumer["cancelled_by"]) == ("ct", "q", "server")


def at(ms, **fields):
    return {"ts_ns": 1_795_000_000_000_000_000 + ms * 1_000_000, **fields}


def test_flow_control_intervals():
    out = analyse([
        at(0, method="channel.flow", direction=S, args_json='{"active": false}', channel=1),
        at(250, method="channel.flow", direction=S, args_json='{"active": true}', channel=1),
        at(300, method="connection.blocked", direction=S, args_json='{"reason": "low on memory"}', channel=0),
        at(900, method="connection.unblocked", direction=S, args_json="{}", channel=0),
        at(950, method="channel.flow", direction=C, args_json='{"active": false}', channel=2),
    ])
    assert pick(out["flow_control"], "channel", "mechanism", "initiator", "reason", "duration_ms") == [
        (0, "connection.blocked", "server", "low on memory", 600.0), (1, "channel.flow", "server", None, 250.0),
        (2, "channel.flow", "client", None, None)]


def handshake(connection):
    rows = [
        at(0, kind="protocol-header", direction=C, method=None),
        at(1, method="connection.start", direction=S, args_json='{"server_properties": {"product": "RabbitMQ"}}'),
        at(2, method="connection.start-ok", direction=C,
           args_json='{"mechanism": "PLAIN", "auth_user": "bob", "response": "<redacted>"}'),
        at(5, method="connection.tune", direction=S, args_json='{"heartbeat": 60}'),
        at(6, method="connection.tune-ok", direction=C, args_json='{"heartbeat": 1}'),
        at(7, method="connection.open", direction=C, args_json='{"virtual_host": "/v"}'),
        at(9, method="connection.open-ok", direction=S),
    ]
    return [dict(r, connection=connection, channel=0) for r in rows]


def test_handshake_and_end_reasons():
    rows = handshake("closed") + handshake("silent") + handshake("cut")
    rows += [at(10, method="connection.close", direction=C, reply_code=200, connection="closed", channel=0,
                failing_class_id=0, failing_method_id=0),
             at(11, method="connection.close-ok", direction=S, connection="closed", channel=0)]
    base = 1_795_000_000_000_000
    out = analyse(rows, streams=[stream("closed", "fin", base + 1_000_000), stream("silent", "rst", base + 5_000_000),
                                 stream("cut", "rst", base)])
    got = {r["connection"]: r for r in out["connections"]}
    assert got["closed"]["end_reason"] == "close" and got["closed"]["close_initiator"] == "client"
    assert got["silent"]["end_reason"] == "heartbeat-timeout"  # 1 s heartbeat, 5 s without client traffic
    assert got["cut"]["end_reason"] == "rst"
    row = got["closed"]
    assert (row["handshake_ms"], row["auth_ms"]) == (9.0, 4.0)
    assert (row["server_product"], row["auth_mechanism"], row["auth_user"], row["vhost"]) == ("RabbitMQ", "PLAIN", "bob", "/v")
    assert (row["heartbeat_proposed"], row["heartbeat"]) == (60, 1)


def test_heartbeat_silences():
    base = 1_795_000_000_000_000_000
    second = 1_000_000_000
    rows = [dict(r, channel=0) for r in handshake("c1")]  # heartbeat 1 s agreed
    rows += [{"ts_ns": base + t * second, "kind": "heartbeat", "direction": C, "channel": 0, "method": None}
             for t in (1, 2, 5, 6)]                       # one silence of 3 s > 2 x 1 s
    out = analyse(rows, streams=[stream(last_ts=(base + 9 * second) // 1000)])  # then 3 s of nothing: timeout
    client = next(r for r in out["heartbeats"] if r["direction"] == C)
    assert (client["heartbeat_s"], client["heartbeats"], client["long_silences"], client["longest_silence_s"],
            client["final_silence_s"], client["ended_after_silence"]) == (1, 4, 2, 3.0, 3.0, True)


def test_message_flow_matching():
    from tests.helpers.tabulated import message_flows
    publishes, deliveries = [], []
    given = [
        ("publish", "pub", "A", {}),
        ("deliver", "c1", "A", {"consumer_tag": "t1", "delivery_tag": 1}),  # fan-out: queue 1
        ("deliver", "c2", "A", {"consumer_tag": "t2", "delivery_tag": 1}),  # ... and queue 2
        ("publish", "pub", "B", {}), ("publish", "pub", "B", {}),           # a burst of twins
        ("deliver", "c1", "B", {"consumer_tag": "t1", "delivery_tag": 2}),
        ("deliver", "c1", "B", {"consumer_tag": "t1", "delivery_tag": 3}),
        ("deliver", "c1", "B", {"consumer_tag": "t1", "delivery_tag": 4, "redelivered": True}),
        ("publish", "pub", "C", {"message_id": "m-9"}),                     # never delivered
        ("deliver", "c1", "Z", {"consumer_tag": "t1", "delivery_tag": 5}),  # published before the capture
    ]
    for i, (side, connection, body, fields) in enumerate(given):
        row = {"date": None, "capture": "x.pcap", "connection": connection, "channel": 1, "exchange": "ex",
               "routing_key": "rk", "body_sha256": body, "message_id": None, **fields}
        if side == "publish":
            publishes.append({**row, "published_ns": (i + 1) * 1_000_000})
        else:
            deliveries.append({"redelivered": False, "queue": "q", "settled_ns": None, "outcome": "ack", **row,
                               "delivered_ns": (i + 1) * 1_000_000})
    got = message_flows(publishes, deliveries)
    assert pick(got, "body_sha256", "match", "publisher_connection", "consumer_connection", "delivery_tag",
                "publish_to_deliver_ms") == sorted([
        ("A", "body", "pub", "c1", 1, 1.0), ("A", "body", "pub", "c2", 1, 2.0),
        ("B", "body", "pub", "c1", 2, 2.0), ("B", "body", "pub", "c1", 3, 2.0),
        ("B", "body", "pub", "c1", 4, 3.0),  # the redelivery: the copy its stream got last
        ("C", None, "pub", None, None, None), ("Z", None, None, "c1", 5, None),
    ], key=str)


def test_the_flows_tasks_columns_give_the_rules_rows(monkeypatch, tmp_path):
    """The job's flows tasks pair sides given as Arrow columns and make the rows in Arrow
    (amqpcap.job.stages.flows.part_flows): the rows the rule (flows) gives from the rows themselves,
    key after key in key order and in the rule's order within a key, with equal values: every
    sample's publishes and deliveries, and crafted ones for what the samples lack (fan-out, twins,
    a redelivery, either side missing, times before 1970, a provisional side, a settled delivery),
    staged as the decode tasks stage them (written by table writers a few rows at a time, the
    samples' rows typed, as the rules make them, the crafted ones mappings; their sides keyed and
    staged column by column), by two tasks with the rows dealt at random, a few keys at a time."""
    import datetime
    import random

    import pyarrow as pa
    import pyarrow.compute as pc

    from amqpcap.job.stages import flows as stage
    from amqpcap.lake.tablefiles import TableFiles
    from amqpcap.rules.message_flows import DELIVERY_COLUMNS, PUBLISH_COLUMNS, flow_key, flows
    from amqpcap.tables.registry import DELIVERIES, PUBLISHES
    from tests.helpers.samples import SAMPLES
    from tests.helpers.tabulated import tabulated_folder
    tables = tabulated_folder(str(SAMPLES))
    publishes, deliveries = list(tables["publishes"]), list(tables["deliveries"])
    given = [
        ("publish", "pub", "A", {}),
        ("deliver", "c1", "A", {"consumer_tag": "t1", "delivery_tag": 1, "settled_ns": 3_100_000}),
        ("deliver", "c2", "A", {"consumer_tag": "t2", "delivery_tag": 1, "provisional": True}),
        ("publish", "pub", "B", {}), ("publish", "pub", "B", {"provisional": True}),
        ("deliver", "c1", "B", {"consumer_tag": "t1", "delivery_tag": 2}),
        ("deliver", "c1", "B", {"consumer_tag": "t1", "delivery_tag": 3}),
        ("deliver", "c1", "B", {"consumer_tag": "t1", "delivery_tag": 4, "redelivered": True}),
        ("publish", "pub", "C", {"message_id": "m-9"}),
        ("deliver", "c1", "Z", {"consumer_tag": "t1", "delivery_tag": 5}),
    ]
    for i, (side, connection, body, fields) in enumerate(given):
        ts_ns = (i - 3) * 1_000_000 - 1_500  # before 1970 first: micros() floors
        row = {"date": datetime.date(1970, 1, 1) if ts_ns >= 0 else datetime.date(1969, 12, 31), "capture": "x.pcap",
               "source": "x.pcap", "provisional": False, "connection": connection, "channel": 1,
               "message_key": f"x.pcap#{i}", "exchange": "ex", "routing_key": "rk", "body_sha256": body,
               "message_id": None, **fields}
        if side == "publish":
            publishes.append({**row, "published_ns": ts_ns})
        else:
            deliveries.append({"redelivered": False, "queue": "q", "settled_ns": None, "outcome": "ack", **row,
                               "delivered_ns": ts_ns})
    staging = str(tmp_path / "staging")
    tasks = []
    for tag in ("a", "b"):
        writer, sides = TableFiles(str(tmp_path / "lake"), "r", tag=tag, batch_rows=7), stage.FlowSides(staging, tag, 1)
        sides.tap(writer)
        tasks.append((writer, sides))
    deal = random.Random(12)
    for table, rows in ((PUBLISHES, publishes), (DELIVERIES, deliveries)):
        for row in rows:
            tasks[deal.randrange(2)][0].add(table, row)
    for writer, sides in tasks:
        writer.close()
        sides.close()
    monkeypatch.setattr(stage, "SLICE_KEYS", 5)
    staged = stage._read_part(staging, 0)
    assert staged.num_rows == len(publishes) + len(deliveries)
    got = pa.concat_tables(list(stage.part_flows(staged)))
    got = pa.table({name: pc.cast(column, pa.int64()) if pa.types.is_timestamp(column.type) else column
                    for name, column in zip(got.column_names, got.columns)}).to_pylist()

    keyed: dict = {}
    for rows, names in ((publishes, PUBLISH_COLUMNS), (deliveries, DELIVERY_COLUMNS)):
        for row in rows:
            keyed.setdefault(flow_key(row), []).append({name: row.get(name) for name in names})

    def job_order(side):  # the flows tasks' sort within a key (stage.SORT)
        delivery = "delivered_ns" in side
        return (side["delivered_ns" if delivery else "published_ns"], delivery, side["connection"], side["channel"],
                side["message_key"])
    want = [row for key in sorted(keyed) for row in flows(sorted(keyed[key], key=job_order))]
    assert sum(1 for row in want if row["match"] == "body") > 50 and len(keyed) > 5 * 5
    assert any(row["redelivered"] and row["match"] for row in want) and any(row["provisional"] for row in want)
    assert any(row["published_at"] is not None and row["published_at"] < 0 for row in want)
    assert got == want
