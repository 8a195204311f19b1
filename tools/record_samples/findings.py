"""The samples recorded for amqpcap's findings (docs/findings.md): a consumer acknowledgement
timeout, a quorum queue's delivery limit, short-lived PHP connections, channel churn, deprecated
features, a blocked publisher and unroutable mandatory publishes.  As everywhere in this recorder,
each scenario states in ctx.exp every AMQP method it causes and the broker must answer.  Besides,
ctx.exp.facts holds what the scenario did and what the clients saw (names, counts, timings, the
broker's reply texts); expected.json also gets broker_config (the node's configuration files and
the settings a scenario changed) and the capture's tcpdump stats and TCP retransmissions.  Times in
facts are seconds since the capture was armed (client clock, time.time())."""
from __future__ import annotations

import datetime
import decimal
import functools
import shutil
import time
from pathlib import Path

from . import broker
from .broker import USER, VHOST, _apt_install
from .other_clients import CLIENTS, _client_env, _run_json
from .scenarios import PIKA_CH, pika_channel, pika_connect, pika_label, pump, scenario

PHP_AMQPLIB = "/usr/share/php/PhpAmqpLib/autoload.php"   # Debian's php-amqplib


def finding(description, **kw):
    """@scenario with record_config (broker_config, tcpdump stats in expected.json) and ctx.t0, the
    time the capture was armed (the scenario is called right after), for the times in facts."""
    def deco(fn):
        @functools.wraps(fn)
        def run(ctx):
            ctx.t0 = time.time()
            return fn(ctx)
        scenario(description, record_config=True, **kw)(run)
        return fn
    return deco


def jsonable(v):
    """pika header values -> JSON (bytes as text, datetimes ISO, Decimal as str)."""
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (datetime.datetime, datetime.date)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    return v


def rel(ctx, t):
    return round(t - ctx.t0, 3)


def ensure_php_amqplib() -> None:
    if shutil.which("php") is None or not Path(PHP_AMQPLIB).exists():
        _apt_install("php-cli", "php-amqplib")


# ================================================================== 1. consumer ack timeout
@finding("Consumer acknowledgement timeout: broker consumer_timeout = 3000 ms, channel_tick_interval = "
          "1000 ms. A pika consumer (prefetch 3) gets 3 deliveries, acks 2 and holds the third unacked; "
          "the broker closes channel 1 with 406 PRECONDITION_FAILED (delivery acknowledgement timed out), "
          "pika answers close-ok; a new channel basic.gets the requeued message (redelivered), acks it, "
          "deletes the queue, closes.",
          broker_conf={"consumer_timeout": 3000}, rabbit_env={"channel_tick_interval": 1000})
def consumer_ack_timeout(ctx):
    import pika
    exp, q = ctx.exp, "amqpcap.acktimeout"
    log0 = broker.log_size()
    c = pika_connect(exp)
    ch = pika_channel(exp, c)
    ch_no = ch.channel_number
    ch.queue_declare(q, durable=True); exp.rpc("queue.declare")
    ch.basic_qos(prefetch_count=3); exp.rpc("basic.qos")
    for i in range(3):
        ch.basic_publish("", q, f"ack-timeout message {i}".encode(),
                         pika.BasicProperties(message_id=f"timeout-{i}", content_type="text/plain"))
    exp.c("basic.publish", 3); exp.msg("published", 3)
    got, closed = [], []
    ch._impl.add_on_close_callback(lambda _chan, reason: closed.append((time.time(), reason)))
    ch.basic_consume(q, lambda chan, m, p, b: got.append((time.time(), m, p, b)))
    exp.rpc("basic.consume")
    pump(c, lambda: len(got) == 3)
    exp.s("basic.deliver", 3); exp.msg("delivered", 3)
    ch.basic_ack(got[0][1].delivery_tag)
    ch.basic_ack(got[1][1].delivery_tag)
    exp.c("basic.ack", 2); exp.msg("acked", 2)
    t_hold = time.time()
    pump(c, lambda: closed, timeout=20)
    t_closed, reason = closed[0]
    # broker's channel.close, pika's channel.close-ok
    exp.s("channel.close"); exp.reply_code("channel.close", reason.reply_code); exp.c("channel.close-ok")
    assert reason.reply_code == 406, reason
    c.sleep(0.3)

    ch2 = pika_channel(exp, c)
    m, p, b = ch2.basic_get(q, auto_ack=False)
    exp.rpc("basic.get", reply="basic.get-ok"); exp.msg("get_ok")
    assert m is not None and p.message_id == "timeout-2", (m, p)
    exp.msg("redelivered", int(m.redelivered))
    ch2.basic_ack(m.delivery_tag); exp.c("basic.ack"); exp.msg("acked")
    ch2.queue_delete(q); exp.rpc("queue.delete")
    ch2.close(); exp.rpc("channel.close", code=PIKA_CH)
    c.close(); exp.lib_close()
    exp.max_body(len(b"ack-timeout message 0"))
    time.sleep(0.2)
    log = [l for l in broker.log_since(log0).splitlines() if "timed out" in l or "PRECONDITION" in l]
    exp.facts = {
        "client": pika_label(), "queue": q, "queue_type": "classic, durable", "prefetch_count": 3,
        "consumer_timeout_ms": 3000, "channel_tick_interval_ms": 1000,
        "effective_broker_env": {"consumer_timeout": broker.env_value("consumer_timeout"),
                                 "channel_tick_interval": broker.env_value("channel_tick_interval")},
        "published": 3, "delivered": 3, "acked_on_consumer_channel": 2, "held_unacked": "timeout-2",
        "consumer_channel": ch_no,
        "deliveries": [{"t": rel(ctx, t), "delivery_tag": m.delivery_tag, "message_id": p.message_id,
                        "redelivered": m.redelivered} for t, m, p, b in got],
        "hold_started_t": rel(ctx, t_hold),
        "channel_closed_by_broker_t": rel(ctx, t_closed),
        "seconds_from_held_delivery_to_close": round(t_closed - got[2][0], 3),
        "broker_channel_close": {"channel": ch_no, "reply_code": reason.reply_code,
                                 "reply_text": reason.reply_text, "class_id": 0, "method_id": 0},
        "after_close": {"new_channel": ch2.channel_number, "basic_get_message_id": p.message_id,
                        "basic_get_redelivered": m.redelivered, "acked": True, "queue_deleted": True},
        "broker_log_lines": log[-4:],
    }
    exp.note("The broker's channel.close (406) carries class-id 0 / method-id 0 (not caused by a "
             "method). Its timing depends on the 1 s channel tick: the close comes 3-4 s after the held "
             "delivery. pika reuses channel number 1 for the second channel after the close-ok.")


# ================================================================== 2. quorum delivery limit
@finding("Quorum queue with x-delivery-limit 3 and a dead-letter exchange: pika publishes a good "
          "message and a poison message; the consumer (prefetch 1) acks the good one and keeps returning "
          "the poison one with requeue (alternating basic.reject requeue=true and basic.nack "
          "requeue=true) until the broker dead-letters it (reason delivery_limit) to a classic "
          "dead-letter queue, where a second consumer receives it with its x-death header and acks it.")
def quorum_delivery_limit(ctx):
    import pika
    exp = ctx.exp
    qq, dlx, dlq, dlrk = "amqpcap.poison.qq", "amqpcap.poison.dlx", "amqpcap.poison.dead", "poison"
    limit = 3
    c = pika_connect(exp)
    ch = pika_channel(exp, c)
    ch.exchange_declare(dlx, exchange_type="direct", durable=True); exp.rpc("exchange.declare")
    ch.queue_declare(dlq, durable=True); exp.rpc("queue.declare")
    ch.queue_bind(dlq, dlx, routing_key=dlrk); exp.rpc("queue.bind")
    qargs = {"x-queue-type": "quorum", "x-delivery-limit": limit,
             "x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": dlrk}
    ch.queue_declare(qq, durable=True, arguments=qargs); exp.rpc("queue.declare")
    ch.basic_qos(prefetch_count=1); exp.rpc("basic.qos")
    for mid, body in (("good-1", b"a good message"), ("poison-1", b"a poison message")):
        ch.basic_publish("", qq, body, pika.BasicProperties(message_id=mid, content_type="text/plain",
                                                            delivery_mode=2))
    exp.c("basic.publish", 2); exp.msg("published", 2)

    deliveries, dead = [], []
    returns = {"reject": 0, "nack": 0}

    def on_qq(chan, m, p, b):
        deliveries.append({"t": rel(ctx, time.time()), "delivery_tag": m.delivery_tag,
                           "message_id": p.message_id, "redelivered": m.redelivered,
                           "x-delivery-count": (p.headers or {}).get("x-delivery-count")})
        if p.message_id == "good-1":
            chan.basic_ack(m.delivery_tag)
            deliveries[-1]["action"] = "ack"
        elif returns["reject"] <= returns["nack"]:
            chan.basic_reject(m.delivery_tag, requeue=True)
            returns["reject"] += 1
            deliveries[-1]["action"] = "basic.reject requeue=true"
        else:
            chan.basic_nack(m.delivery_tag, multiple=False, requeue=True)
            returns["nack"] += 1
            deliveries[-1]["action"] = "basic.nack requeue=true"

    ch2 = pika_channel(exp, c)
    ch2.basic_consume(dlq, lambda chan, m, p, b: (dead.append((time.time(), m, p, b)),
                                                   chan.basic_ack(m.delivery_tag)))
    exp.rpc("basic.consume")
    tag = ch.basic_consume(qq, on_qq)
    exp.rpc("basic.consume")
    pump(c, lambda: dead, timeout=30)
    c.sleep(0.5)   # nothing more may arrive on the quorum queue
    n_qq = len(deliveries)
    exp.s("basic.deliver", n_qq + 1); exp.msg("delivered", n_qq + 1)
    exp.c("basic.ack", 2); exp.msg("acked", 2)
    exp.c("basic.reject", returns["reject"]); exp.msg("rejected", returns["reject"])
    exp.c("basic.nack", returns["nack"]); exp.msg("nacked", returns["nack"])
    exp.msg("requeued", returns["reject"] + returns["nack"])
    exp.msg("redelivered", sum(1 for d in deliveries if d["redelivered"]) + int(dead[0][1].redelivered))
    ch.basic_cancel(tag); exp.rpc("basic.cancel")
    t_dead, dm, dp, db = dead[0]
    ch.queue_delete(qq); exp.rpc("queue.delete")
    ch.queue_delete(dlq); exp.rpc("queue.delete")
    # deleting the dead-letter queue cancels channel 2's consumer: the broker sends basic.cancel
    # (pika advertises consumer_cancel_notify and does not answer it)
    pump(c, lambda: not ch2.consumer_tags)
    exp.s("basic.cancel")
    ch.exchange_delete(dlx); exp.rpc("exchange.delete")
    ch2.close(); exp.rpc("channel.close", code=PIKA_CH)
    ch.close(); exp.rpc("channel.close", code=PIKA_CH)
    c.close(); exp.lib_close()
    exp.max_body(len(b"a poison message"))
    poison = [d for d in deliveries if d["message_id"] == "poison-1"]
    exp.facts = {
        "client": pika_label(), "quorum_queue": qq, "quorum_queue_arguments": qargs,
        "dead_letter_exchange": {"name": dlx, "type": "direct", "durable": True},
        "dead_letter_queue": {"name": dlq, "type": "classic", "durable": True, "binding_key": dlrk},
        "prefetch_count": 1, "channels": {"quorum consumer": ch.channel_number, "dead-letter consumer": ch2.channel_number},
        "published": ["good-1", "poison-1"],
        "poison_deliveries": len(poison), "poison_redeliveries": len(poison) - 1,
        "poison_returned_with_requeue": returns["reject"] + returns["nack"],
        "basic_reject_requeue": returns["reject"], "basic_nack_requeue": returns["nack"],
        "quorum_queue_deliveries": deliveries,
        "dead_lettered": {"t": rel(ctx, t_dead), "queue": dlq, "exchange": dm.exchange,
                          "routing_key": dm.routing_key, "redelivered": dm.redelivered,
                          "message_id": dp.message_id, "body": db.decode(),
                          "headers": jsonable(dp.headers)},
    }
    exp.note(f"The poison message was delivered {len(poison)} times from the quorum queue "
             f"(x-delivery-limit {limit}); after the last requeue the broker dead-lettered it "
             f"(x-death reason delivery_limit) to {dlq}. The redelivered flag and x-delivery-count "
             f"header of each delivery are in facts.quorum_queue_deliveries (absent on the first "
             f"delivery, 1..{limit} on the redeliveries). The dead-letter consumer on channel 2 is cancelled by "
             f"the broker (basic.cancel) when channel 1 deletes the dead-letter queue.")


# ================================================================== 3. php short-lived connections
@finding("Many short-lived connections: php-amqplib (Debian package) opens one connection per "
          "published message, 30 connections ~0.55 s apart: AMQPLAIN login, channel.open, "
          "queue.declare (transient, non-exclusive), one basic.publish, channel.close, connection.close.")
def php_short_lived(ctx):
    exp, q, n, pause = ctx.exp, "amqpcap.php.shortlived", 30, 550
    ensure_php_amqplib()
    seen = _run_json(["php", str(CLIENTS / "php_short_lived.php"), q, str(n), str(pause)], _client_env())
    assert len(seen["connections"]) == n
    label = f"{seen['library']} (PHP {seen['php']})"
    for _ in range(n):
        exp.lib_connect(label, USER, "AMQPLAIN")
        exp.lib_channel()
        exp.rpc("queue.declare")
        exp.c("basic.publish"); exp.msg("published")
        exp.rpc("channel.close", code=0)
        exp.lib_close(0)
    exp.max_body(len(b"short-lived connection 10"))
    time.sleep(0.3)
    depth = broker.ctl("list_queues", "-p", VHOST, "-q", "--no-table-headers", "name", "messages").stdout.split()
    exp.facts = {
        "client": label, "client_script": "tools/record_samples/clients/php_short_lived.php",
        "queue": q, "queue_declare": {"passive": False, "durable": False, "exclusive": False, "auto_delete": False},
        "connections": n, "messages_per_connection": 1, "pause_between_connections_ms": pause,
        "login_method": "AMQPLAIN", "heartbeat": 0,
        "elapsed_s": seen["elapsed_s"],
        "server_product": seen.get("server_product"), "server_version": seen.get("server_version"),
        "per_connection": seen["connections"],
        "queue_depth_after (rabbitmqctl list_queues, off the wire)": dict(zip(depth[::2], depth[1::2])),
    }
    exp.note("Each TCP connection is a full handshake + one publish + close; every client port is "
             "different (facts.per_connection[].local). php-amqplib closes channel and connection with "
             "reply-code 0, and the queue.declare-ok message-count grows 0..29.")


# ================================================================== 4. channel churn
@finding("Channel churn: one pika connection keeps channel 1 open (exclusive queue) and opens and "
          "closes 50 more channels in a few seconds: 25 one after another (each reuses channel "
          "number 2), then 25 at once (numbers 2..26) closed in reverse order; each churn channel "
          "publishes one message; channel 1 checks the queue depth (50) and deletes the queue.")
def channel_churn(ctx):
    import pika
    exp, q = ctx.exp, "amqpcap.churn"
    c = pika_connect(exp)
    ch1 = pika_channel(exp, c)
    ch1.queue_declare(q, exclusive=True); exp.rpc("queue.declare")
    numbers_a, numbers_b = [], []
    t_a = time.time()
    for i in range(25):
        ch = pika_channel(exp, c)
        numbers_a.append(ch.channel_number)
        ch.basic_publish("", q, f"churn A {i}".encode(), pika.BasicProperties(message_id=f"A-{i}"))
        exp.c("basic.publish"); exp.msg("published")
        ch.close(); exp.rpc("channel.close", code=PIKA_CH)
        c.sleep(0.04)
    t_b = time.time()
    open_chs = []
    for i in range(25):
        ch = pika_channel(exp, c)
        numbers_b.append(ch.channel_number)
        open_chs.append(ch)
        ch.basic_publish("", q, f"churn B {i}".encode(), pika.BasicProperties(message_id=f"B-{i}"))
        exp.c("basic.publish"); exp.msg("published")
        c.sleep(0.02)
    for ch in reversed(open_chs):
        ch.close(); exp.rpc("channel.close", code=PIKA_CH)
        c.sleep(0.02)
    t_end = time.time()
    ok = ch1.queue_declare(q, passive=True); exp.rpc("queue.declare")
    depth = ok.method.message_count
    assert depth == 50, depth
    ch1.queue_delete(q); exp.rpc("queue.delete")
    ch1.close(); exp.rpc("channel.close", code=PIKA_CH)
    c.close(); exp.lib_close()
    exp.max_body(len(b"churn A 10"))
    exp.facts = {
        "client": pika_label(), "queue": q, "long_lived_channel": 1,
        "churn_channels_opened": 50, "churn_channels_closed": 50, "channels_opened_total": 51,
        "phase_a": {"count": 25, "pattern": "open, publish, close, 40 ms pause", "channel_numbers": numbers_a,
                    "start_t": rel(ctx, t_a), "end_t": rel(ctx, t_b)},
        "phase_b": {"count": 25, "pattern": "open+publish 25 (20 ms apart), then close in reverse order (20 ms apart)",
                    "channel_numbers": numbers_b, "close_order": list(reversed(numbers_b)),
                    "start_t": rel(ctx, t_b), "end_t": rel(ctx, t_end)},
        "churn_seconds": round(t_end - t_a, 3),
        "queue_depth_by_passive_declare": depth,
    }
    exp.note("A decoder must treat a re-opened channel number as a new channel: channel 2 is opened and "
             "closed 26 times in all (25 in phase A, once more in phase B).")


# ================================================================== 5. deprecated features
@finding("Features deprecated in later RabbitMQ releases (global QoS, transient non-exclusive "
          "queues), accepted by RabbitMQ 3.10: pika sends basic.qos prefetch_count=10 global=true, "
          "then basic.qos prefetch_count=2 global=false, declares a transient (durable=false) "
          "non-exclusive, non-auto-delete queue, publishes 3 messages, consumes and acks them, "
          "cancels, deletes the queue.")
def deprecated_features(ctx):
    exp, q = ctx.exp, "amqpcap.transient.nonexclusive"
    log0 = broker.log_size()
    c = pika_connect(exp)
    ch = pika_channel(exp, c)
    ch.basic_qos(prefetch_count=10, global_qos=True); exp.rpc("basic.qos")
    ch.basic_qos(prefetch_count=2, global_qos=False); exp.rpc("basic.qos")
    ok = ch.queue_declare(q, durable=False, exclusive=False, auto_delete=False); exp.rpc("queue.declare")
    for i in range(3):
        ch.basic_publish("", q, f"transient {i}".encode())
    exp.c("basic.publish", 3); exp.msg("published", 3)
    got = []
    tag = ch.basic_consume(q, lambda chan, m, p, b: (got.append(m.delivery_tag), chan.basic_ack(m.delivery_tag)))
    exp.rpc("basic.consume")
    pump(c, lambda: len(got) == 3)
    exp.s("basic.deliver", 3); exp.msg("delivered", 3); exp.c("basic.ack", 3); exp.msg("acked", 3)
    info = broker.ctl("list_queues", "-p", VHOST, "-q", "--no-table-headers", "name", "durable", "exclusive", "auto_delete",
                      "type").stdout.strip()
    ch.basic_cancel(tag); exp.rpc("basic.cancel")
    ch.queue_delete(q); exp.rpc("queue.delete")
    ch.close(); exp.rpc("channel.close", code=PIKA_CH)
    c.close(); exp.lib_close()
    exp.max_body(len(b"transient 0"))
    time.sleep(0.2)
    log = broker.log_since(log0)
    exp.facts = {
        "client": pika_label(), "broker": broker.broker_version(),
        "basic_qos": [{"prefetch_size": 0, "prefetch_count": 10, "global": True, "reply": "basic.qos-ok"},
                      {"prefetch_size": 0, "prefetch_count": 2, "global": False, "reply": "basic.qos-ok"}],
        "queue": q, "queue_declare": {"passive": False, "durable": False, "exclusive": False,
                                      "auto_delete": False, "arguments": {}, "reply": "queue.declare-ok",
                                      "message_count": ok.method.message_count,
                                      "consumer_count": ok.method.consumer_count},
        "rabbitmqctl_list_queues (name durable exclusive auto_delete type)": info,
        "published": 3, "delivered": 3, "acked": 3,
        "broker_log_mentions_deprecat": [l for l in log.splitlines() if "eprecat" in l],
    }
    exp.note("RabbitMQ 3.10 accepts both without a warning (no deprecation line in its log). In "
             "RabbitMQ 3.13/4.x these are the deprecated features global_qos and "
             "transient_nonexcl_queues (4.0 ignores global QoS; denying transient_nonexcl_queues makes "
             "the declare fail).")


# ================================================================== 6. blocked publisher
@finding("Blocked publisher: a pika consumer connection and a pika publisher connection (both "
          "advertise the connection.blocked capability); one publish before the alarm is delivered; "
          "rabbitmqctl set_vm_memory_high_watermark 0.0000001 raises the memory alarm; the publisher "
          "publishes 3 more messages and gets connection.blocked (reason 'low on memory'); the held "
          "messages reach the consumer only after set_vm_memory_high_watermark 0.4 clears the alarm and "
          "the broker sends connection.unblocked.")
def blocked_publisher(ctx):
    import pika
    exp, q = ctx.exp, "amqpcap.blocked"
    events = []

    def cb(who, kind):
        def f(conn, frame):
            reason = getattr(frame.method, "reason", None)
            events.append({"t": rel(ctx, time.time()), "connection": who, "event": kind, "reason": reason})
        return f

    cons = pika_connect(exp)
    cons.add_on_connection_blocked_callback(cb("consumer", "connection.blocked"))
    cons.add_on_connection_unblocked_callback(cb("consumer", "connection.unblocked"))
    cch = pika_channel(exp, cons)
    cch.queue_declare(q, exclusive=False, auto_delete=False); exp.rpc("queue.declare")
    got = []
    cch.basic_consume(q, lambda chan, m, p, b: (got.append({"t": rel(ctx, time.time()), "message_id": p.message_id}),
                                                chan.basic_ack(m.delivery_tag)))
    exp.rpc("basic.consume")

    pub = pika_connect(exp)
    pub.add_on_connection_blocked_callback(cb("publisher", "connection.blocked"))
    pub.add_on_connection_unblocked_callback(cb("publisher", "connection.unblocked"))
    pch = pika_channel(exp, pub)
    published = []

    def publish(mid):
        pch.basic_publish("", q, f"blocked test {mid}".encode(), pika.BasicProperties(message_id=mid))
        published.append({"t": rel(ctx, time.time()), "message_id": mid})
        exp.c("basic.publish"); exp.msg("published")

    publish("before-alarm")
    pump(cons, lambda: len(got) == 1)
    alarm = []
    t = time.time()
    try:
        r = broker.ctl("set_vm_memory_high_watermark", "0.0000001")
        alarm.append({"t_start": rel(ctx, t), "t_end": rel(ctx, time.time()),
                      "command": "rabbitmqctl set_vm_memory_high_watermark 0.0000001", "rc": r.returncode,
                      "output": r.stdout.strip()})
        time.sleep(1.0)
        alarms_on = broker.ctl("eval", "rabbit_alarm:get_alarms().", check=False).stdout.strip()
        for i in range(3):
            publish(f"during-alarm-{i}")
            for conn in (pub, cons):
                conn.process_data_events(time_limit=0.3)
        pump(pub, lambda: any(e["event"] == "connection.blocked" and e["connection"] == "publisher" for e in events))
        t_wait = time.time()
        while time.time() - t_wait < 2.5:   # the consumer must not get the held messages while blocked
            for conn in (pub, cons):
                conn.process_data_events(time_limit=0.1)
        delivered_while_blocked = [g["message_id"] for g in got[1:]]
    except BaseException:   # never leave the memory alarm on for the next scenario
        broker.ctl("set_vm_memory_high_watermark", "0.4", check=False)
        raise
    t = time.time()
    r = broker.ctl("set_vm_memory_high_watermark", "0.4")
    alarm.append({"t_start": rel(ctx, t), "t_end": rel(ctx, time.time()),
                  "command": "rabbitmqctl set_vm_memory_high_watermark 0.4", "rc": r.returncode,
                  "output": r.stdout.strip()})
    deadline = time.time() + 20
    while not (len(got) == 4 and any(e["event"] == "connection.unblocked" for e in events)):
        if time.time() > deadline:
            raise TimeoutError(f"unblock not seen: {events} {got}")
        for conn in (pub, cons):
            conn.process_data_events(time_limit=0.05)
    for conn in (pub, cons):
        conn.process_data_events(time_limit=0.3)
    blocked = [e for e in events if e["event"] == "connection.blocked"]
    unblocked = [e for e in events if e["event"] == "connection.unblocked"]
    exp.s("connection.blocked", len(blocked)); exp.s("connection.unblocked", len(unblocked))
    exp.s("basic.deliver", 4); exp.msg("delivered", 4); exp.c("basic.ack", 4); exp.msg("acked", 4)
    pch.close(); exp.rpc("channel.close", code=PIKA_CH)
    pub.close(); exp.lib_close()
    cch.queue_delete(q); exp.rpc("queue.delete")   # the consumer is cancelled by the delete
    exp.s("basic.cancel")
    cch.close(); exp.rpc("channel.close", code=PIKA_CH)
    cons.close(); exp.lib_close()
    exp.max_body(len(b"blocked test during-alarm-0"))
    exp.facts = {
        "clients": {"consumer": pika_label() + " (connection 1)", "publisher": pika_label() + " (connection 2)"},
        "client_capability_connection.blocked": True,
        "queue": q, "alarm_commands": alarm, "alarms_while_set": alarms_on,
        "published": published, "deliveries": got,
        "delivered_while_blocked": delivered_while_blocked,
        "blocked_events": blocked, "unblocked_events": unblocked,
        "connection_blocked_reason": blocked[0]["reason"] if blocked else None,
        "seconds_blocked_to_unblocked": round(unblocked[0]["t"] - blocked[0]["t"], 3) if blocked and unblocked else None,
        "restored_watermark": "0.4 (relative; the broker default)",
    }
    exp.note("Only the publishing connection is blocked: the consumer connection, which never "
             "publishes, gets no connection.blocked. The broker stops reading the publisher's socket "
             "once it is blocked, so the publishes after the block sit in TCP buffers until the alarm "
             "clears; they are delivered after connection.unblocked. Deleting the queue while the "
             "consumer is on it makes the broker send basic.cancel (pika does not answer).")


# ================================================================== 7. unroutable mandatory
@finding("Unroutable mandatory publishes: direct exchange amqpcap.routes with one binding "
          "(key 'known' -> exclusive queue). Channel 1 (no confirms): 3 mandatory publishes with "
          "unbound keys (3 basic.return 312 NO_ROUTE), 1 mandatory routed, 1 non-mandatory unroutable "
          "(dropped silently). Channel 2 (confirm.select): 2 mandatory routed (basic.ack), 3 mandatory "
          "unroutable (basic.return 312 then basic.ack each), 1 non-mandatory unroutable (basic.ack only).")
def unroutable_mandatory(ctx):
    import pika
    exp, ex, q = ctx.exp, "amqpcap.routes", "amqpcap.routes.known"
    c = pika_connect(exp)
    ch1 = pika_channel(exp, c)
    ch1.exchange_declare(ex, exchange_type="direct", durable=False, auto_delete=False); exp.rpc("exchange.declare")
    ch1.queue_declare(q, exclusive=True); exp.rpc("queue.declare")
    ch1.queue_bind(q, ex, routing_key="known"); exp.rpc("queue.bind")
    returned = []
    ch1.add_on_return_callback(lambda chan, m, p, b: returned.append(
        {"t": rel(ctx, time.time()), "channel": chan.channel_number, "reply_code": m.reply_code,
         "reply_text": m.reply_text, "exchange": m.exchange, "routing_key": m.routing_key,
         "message_id": p.message_id}))
    sent = []

    def pub(chx, key, mid, mandatory):
        sent.append({"channel": chx.channel_number, "routing_key": key, "message_id": mid, "mandatory": mandatory})
        exp.c("basic.publish"); exp.msg("published")
        chx.basic_publish(ex, key, f"publish {mid}".encode(), pika.BasicProperties(message_id=mid),
                          mandatory=mandatory)

    for i in range(3):
        pub(ch1, f"nowhere.{i}", f"c1-unroutable-{i}", True)
    pub(ch1, "known", "c1-routed-0", True)
    pub(ch1, "nowhere.silent", "c1-silent-0", False)
    pump(c, lambda: len(returned) == 3)
    c.sleep(0.3)
    assert len(returned) == 3
    exp.s("basic.return", 3); exp.msg("returned", 3)
    for _ in range(3):
        exp.reply_code("basic.return", 312)

    ch2 = pika_channel(exp, c)
    ch2.confirm_delivery(); exp.rpc("confirm.select")
    ch2.add_on_return_callback(lambda chan, m, p, b: returned.append(
        {"t": rel(ctx, time.time()), "channel": chan.channel_number, "reply_code": m.reply_code,
         "reply_text": m.reply_text, "exchange": m.exchange, "routing_key": m.routing_key,
         "message_id": p.message_id}))
    confirm_results = []
    plan = [("known", "c2-routed-0", True), ("known", "c2-routed-1", True),
            ("nowhere.0", "c2-unroutable-0", True), ("nowhere.1", "c2-unroutable-1", True),
            ("nowhere.2", "c2-unroutable-2", True), ("nowhere.silent", "c2-silent-0", False)]
    for key, mid, mand in plan:
        try:
            pub(ch2, key, mid, mand)
            confirm_results.append({"message_id": mid, "result": "acked"})
        except pika.exceptions.UnroutableError:
            confirm_results.append({"message_id": mid, "result": "returned (UnroutableError), then acked"})
        exp.s("basic.ack"); exp.msg("confirm_acks"); exp.msg("confirmed_messages")
    c.sleep(0.2)
    n_ret2 = sum(1 for r in returned if r["channel"] == ch2.channel_number)
    exp.s("basic.return", 3); exp.msg("returned", 3)
    for _ in range(3):
        exp.reply_code("basic.return", 312)
    assert n_ret2 == 3, returned
    ok = ch1.queue_delete(q); exp.rpc("queue.delete")
    ch1.exchange_delete(ex); exp.rpc("exchange.delete")
    ch2.close(); exp.rpc("channel.close", code=PIKA_CH)
    ch1.close(); exp.rpc("channel.close", code=PIKA_CH)
    c.close(); exp.lib_close()
    exp.max_body(len(b"publish c1-unroutable-0"))
    exp.facts = {
        "client": pika_label(), "exchange": {"name": ex, "type": "direct", "durable": False},
        "queue": q, "binding_key": "known",
        "publishes": sent, "returns": returned, "confirms_channel": ch2.channel_number,
        "confirm_results": confirm_results,
        "queue_delete_ok_message_count": ok.method.message_count,
    }
    exp.note("Every basic.return is 312 NO_ROUTE with the publish's exchange and routing key. On the "
             "confirm channel each unroutable mandatory publish gets its basic.return before its "
             "basic.ack (delivery tags 1..6, multiple=false). The routed messages (1 + 2) stay in the "
             "queue: queue.delete-ok message-count 3.")
